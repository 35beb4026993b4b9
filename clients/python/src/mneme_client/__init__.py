"""mneme-client: a typed client (sync and async) of mneme's HTTP API.

    from mneme_client import Client

    with Client("http://127.0.0.1:18791") as mneme:
        mneme.remember("I moved to Lisbon last week", sender="dana", scope="user:dana")
        for hit in mneme.recall("where does dana live", user="dana"):
            print(hit.record.text, hit.score)
"""

from ._client import DEFAULT_URL, HOOKS, AsyncClient, Client
from ._types import ForgetReport, Hit, HookOutcome, MnemeError, Record

__all__ = ["DEFAULT_URL", "HOOKS", "AsyncClient", "Client", "ForgetReport", "Hit", "HookOutcome", "MnemeError", "Record"]
