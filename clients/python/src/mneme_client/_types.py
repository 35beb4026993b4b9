"""The HTTP API's answers as typed values (only the fields a caller reads; the rest stays
in ``raw``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Record:
    """One memory: an event (``episodic``), a fact (``semantic``), a skill, ..."""

    id: str
    memory_type: str
    status: str
    scope: str
    sensitivity: str
    summary: str
    payload: dict[str, Any] | None
    tags: list[str]
    created_at: str
    event_time: str | None
    actor: str
    raw: dict[str, Any] = field(repr=False)

    @property
    def text(self) -> str:
        """The memory in words: an event's text, a fact's subject, predicate and object."""
        p = self.payload or {}
        if p.get("kind") == "semantic":
            return " ".join(str(p.get(k, "")) for k in ("subject", "predicate", "object")).strip()
        return str(p.get("text") or self.summary)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Record:
        record = raw.get("record", raw)
        return cls(
            id=record["id"],
            memory_type=record["memory_type"],
            status=record.get("status", "active"),
            scope=record.get("scope", ""),
            sensitivity=record.get("sensitivity", "low"),
            summary=record.get("summary", ""),
            payload=record.get("payload"),
            tags=list(record.get("tags", [])),
            created_at=record.get("created_at", ""),
            event_time=record.get("event_time"),
            actor=(record.get("lineage") or {}).get("actor", ""),
            raw=record,
        )


@dataclass(frozen=True)
class Hit:
    """A recalled memory with its score. ``relevant`` is the calibrated chance that it is
    what the query asks about (about 0.5 at best); ``outdated`` is set when a fact it rests
    on has changed since."""

    record: Record
    score: float
    relevant: float | None
    outdated: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Hit:
        score = raw.get("score") or {}
        return cls(
            record=Record.from_json(raw["record"]),
            score=float(score.get("score", 0.0)),
            relevant=score.get("relevant"),
            outdated=raw.get("outdated"),
            raw=raw,
        )


@dataclass(frozen=True)
class ForgetReport:
    """What ``forget`` erased (or, with ``dry_run``, would erase)."""

    dry_run: bool
    ids: list[str]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ForgetReport:
        items = raw.get("items") or raw.get("records") or []
        return cls(dry_run=bool(raw.get("dry_run", False)), ids=[i["id"] for i in items if "id" in i], raw=raw)


@dataclass(frozen=True)
class HookOutcome:
    """A memory hook's answer: the context to inject, the records it wrote, or why it did
    nothing (``error``: a hook never fails its caller)."""

    context: str | None
    record_ids: list[str]
    error: str | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> HookOutcome:
        return cls(context=raw.get("context"), record_ids=list(raw.get("record_ids", [])), error=raw.get("error"), raw=raw)


class MnemeError(Exception):
    """An error answer from the daemon: its HTTP status, the error code (``not_found``,
    ``invalid_argument``, ``permission_denied``, ...) and its message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} ({code}, HTTP {status})")
        self.status = status
        self.code = code
        self.message = message
