"""Membrane Python client library.

Provides a gRPC client for communicating with the Membrane memory
substrate daemon.
"""

from membrane.client import MembraneClient
from membrane.types import (
    AuditAction,
    AuditEntry,
    DecayCurve,
    DecayProfile,
    DeletionPolicy,
    EdgeKind,
    Lifecycle,
    MemoryRecord,
    MemoryType,
    OutcomeStatus,
    Provenance,
    ProvenanceKind,
    ProvenanceSource,
    Relation,
    RetrieveResult,
    RevisionStatus,
    SelectionResult,
    Sensitivity,
    TaskState,
    TrustContext,
    ValidityMode,
)

__all__ = [
    "AuditAction",
    "AuditEntry",
    "DecayCurve",
    "DecayProfile",
    "DeletionPolicy",
    "EdgeKind",
    "Lifecycle",
    "MembraneClient",
    "MemoryRecord",
    "MemoryType",
    "OutcomeStatus",
    "Provenance",
    "ProvenanceKind",
    "ProvenanceSource",
    "Relation",
    "RetrieveResult",
    "RevisionStatus",
    "SelectionResult",
    "Sensitivity",
    "TaskState",
    "TrustContext",
    "ValidityMode",
]
