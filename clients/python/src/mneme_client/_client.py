"""Sync and async clients of mneme's HTTP API. Both build the same requests
(``_Requests``) and read the same answers; only the transport differs."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

import httpx2

from ._types import ForgetReport, Hit, HookOutcome, MnemeError, Record

DEFAULT_URL = "http://127.0.0.1:18791"
HOOKS = (
    "session_start",
    "message_received",
    "before_tool_call",
    "after_tool_call",
    "agent_end",
    "before_compaction",
    "session_end",
)


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class _Requests:
    """Each call as (method, path, JSON body), and each answer read into its type."""

    @staticmethod
    def options(scope: str | None, sensitivity: str | None, tags: Sequence[str] | None, actor: str | None) -> dict[str, Any]:
        return _drop_none({"scope": scope, "sensitivity": sensitivity, "tags": list(tags) if tags else None, "actor": actor})

    @staticmethod
    def remember(text: str, sender: str | None, kind: str, event_time: str | None, options: dict[str, Any]) -> tuple[str, str, Any]:
        event = _drop_none({"event_kind": kind, "text": text, "sender": sender, "event_time": event_time})
        return "POST", "/v1/ingest/event", {"event": event, "options": options}

    @staticmethod
    def remember_fact(subject: str, predicate: str, obj: str, options: dict[str, Any]) -> tuple[str, str, Any]:
        fact = {"subject": subject, "predicate": predicate, "object": obj, "evidence": []}
        return "POST", "/v1/ingest/observation", {"fact": fact, "options": options}

    @staticmethod
    def recall(
        query: str,
        limit: int,
        types: Sequence[str] | None,
        scopes: Sequence[str] | None,
        user: str | None,
        tags: Sequence[str] | None,
        since: str | None,
        until: str | None,
        include_tombstones: bool,
    ) -> tuple[str, str, Any]:
        scope_list = list(scopes or [])
        if user:
            scope_list.append(f"user:{user}")
        body = _drop_none(
            {
                "query": query,
                "limit": limit,
                "types": list(types) if types else None,
                "scopes": scope_list or None,
                "tags": list(tags) if tags else None,
                "since": since,
                "until": until,
                "include_tombstones": include_tombstones or None,
            }
        )
        return "POST", "/v1/retrieve", body

    @staticmethod
    def revise(record_id: str, action: str, body: dict[str, Any]) -> tuple[str, str, Any]:
        return "POST", f"/v1/records/{record_id}/{action}", body

    @staticmethod
    def forget(
        ids: Sequence[str] | None, query: str | None, subject: str | None, user: str | None, reason: str, dry_run: bool
    ) -> tuple[str, str, Any]:
        if not (ids or query or subject or user):
            raise ValueError("forget needs ids, query, subject or user: what to erase")
        body = _drop_none({"ids": list(ids) if ids else None, "query": query, "subject": subject, "user": user})
        body.update({"reason": reason, "dry_run": dry_run})
        return "POST", "/v1/forget", body

    @staticmethod
    def hook(name: str, event: dict[str, Any]) -> tuple[str, str, Any]:
        if name not in HOOKS:
            raise ValueError(f"unknown hook {name!r}; hooks: {', '.join(HOOKS)}")
        return "POST", f"/v1/hooks/{name}", event

    @staticmethod
    def answer(response: httpx2.Response) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 400:
            error = (body or {}).get("error", {}) if isinstance(body, dict) else {}
            raise MnemeError(response.status_code, error.get("code", "unknown"), error.get("message", response.text[:200]))
        return body


def _http_options(
    url: str, api_key: str | None, timeout: float, ca_file: str | None, cert: tuple[str, str] | None
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    options: dict[str, Any] = {"base_url": url.rstrip("/"), "headers": headers, "timeout": timeout}
    if ca_file or cert:
        context = ssl.create_default_context(cafile=ca_file)
        if cert:
            context.load_cert_chain(cert[0], cert[1])
        options["verify"] = context
    return options


class Client:
    """A mneme daemon's HTTP API, blocking.

    ``url`` is the daemon's HTTP address (``https://`` when it serves TLS; ``ca_file``
    names the authority that signed its certificate, ``cert`` a client certificate and its
    key, as PEM file paths, for a daemon that requires one). ``api_key`` is sent as a bearer
    token (loopback daemons without principals need none). Error answers raise
    :class:`MnemeError`.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        ca_file: str | None = None,
        cert: tuple[str, str] | None = None,
    ) -> None:
        self._http = httpx2.Client(**_http_options(url, api_key, timeout, ca_file, cert))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        return _Requests.answer(self._http.request(method, path, json=body))

    def health(self) -> dict[str, Any]:
        """``/healthz``: the daemon's version, pid and store (no key needed)."""
        return self._call("GET", "/healthz")

    def remember(
        self,
        text: str,
        *,
        sender: str | None = None,
        kind: str = "message",
        event_time: str | None = None,
        scope: str | None = None,
        sensitivity: str | None = None,
        tags: Sequence[str] | None = None,
        actor: str | None = None,
    ) -> Record:
        """Stores an event (a message, by default). ``<private>...</private>`` spans are
        never stored."""
        options = _Requests.options(scope, sensitivity, tags, actor)
        return Record.from_json(self._call(*_Requests.remember(text, sender, kind, event_time, options)))

    def remember_fact(
        self,
        subject: str,
        predicate: str,
        obj: str,
        *,
        scope: str | None = None,
        sensitivity: str | None = None,
        tags: Sequence[str] | None = None,
        actor: str | None = None,
    ) -> Record:
        """Stores a fact (subject, predicate, object)."""
        options = _Requests.options(scope, sensitivity, tags, actor)
        return Record.from_json(self._call(*_Requests.remember_fact(subject, predicate, obj, options)))

    def recall(
        self,
        query: str = "",
        *,
        limit: int = 10,
        types: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        user: str | None = None,
        tags: Sequence[str] | None = None,
        since: str | None = None,
        until: str | None = None,
        include_tombstones: bool = False,
    ) -> list[Hit]:
        """Searches memory by meaning and words. ``user`` adds that end user's scope."""
        request = _Requests.recall(query, limit, types, scopes, user, tags, since, until, include_tombstones)
        return [Hit.from_json(h) for h in self._call(*request)["hits"]]

    def get(self, record_id: str) -> Record:
        """One record by id (superseded and retracted ones included)."""
        return Record.from_json(self._call("GET", f"/v1/records/{record_id}"))

    def history(self, record_id: str) -> dict[str, Any]:
        """A record's lineage, links and audit log."""
        return self._call("GET", f"/v1/records/{record_id}/history")

    def supersede(self, record_id: str, payload: dict[str, Any], *, rationale: str, actor: str = "client") -> Record:
        """Replaces a record's payload; the old one stays in history with the rationale."""
        body = {"change": {"payload": payload}, "actor": actor, "rationale": rationale}
        return Record.from_json(self._call(*_Requests.revise(record_id, "supersede", body)))

    def retract(self, record_id: str, *, rationale: str, actor: str = "client") -> Record:
        """Withdraws a record (kept, marked retracted)."""
        return Record.from_json(self._call(*_Requests.revise(record_id, "retract", {"actor": actor, "rationale": rationale})))

    def contest(self, record_id: str, *, rationale: str, claim: str | None = None, actor: str = "client") -> Record:
        """Flags a record as disputed."""
        body = _drop_none({"claim": claim, "actor": actor, "rationale": rationale})
        return Record.from_json(self._call(*_Requests.revise(record_id, "contest", body)))

    def reinforce(self, record_id: str, *, rationale: str = "", actor: str = "client") -> Record:
        """Marks a record as useful (its salience rises)."""
        return Record.from_json(self._call(*_Requests.revise(record_id, "reinforce", {"actor": actor, "rationale": rationale})))

    def forget(
        self,
        *,
        ids: Sequence[str] | None = None,
        query: str | None = None,
        subject: str | None = None,
        user: str | None = None,
        reason: str = "",
        dry_run: bool = False,
    ) -> ForgetReport:
        """Erases for good what the selection chooses (and what was derived from it).
        Try ``dry_run=True`` first: it lists what would go."""
        return ForgetReport.from_json(self._call(*_Requests.forget(ids, query, subject, user, reason, dry_run)))

    def hook(self, name: str, event: dict[str, Any]) -> HookOutcome:
        """A memory hook (``session_start``, ``message_received``, ...) with its event as
        the agent sends it."""
        return HookOutcome.from_json(self._call(*_Requests.hook(name, event)))


class AsyncClient:
    """:class:`Client` for asyncio: the same methods, awaited."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        ca_file: str | None = None,
        cert: tuple[str, str] | None = None,
    ) -> None:
        self._http = httpx2.AsyncClient(**_http_options(url, api_key, timeout, ca_file, cert))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        return _Requests.answer(await self._http.request(method, path, json=body))

    async def health(self) -> dict[str, Any]:
        return await self._call("GET", "/healthz")

    async def remember(
        self,
        text: str,
        *,
        sender: str | None = None,
        kind: str = "message",
        event_time: str | None = None,
        scope: str | None = None,
        sensitivity: str | None = None,
        tags: Sequence[str] | None = None,
        actor: str | None = None,
    ) -> Record:
        options = _Requests.options(scope, sensitivity, tags, actor)
        return Record.from_json(await self._call(*_Requests.remember(text, sender, kind, event_time, options)))

    async def remember_fact(
        self,
        subject: str,
        predicate: str,
        obj: str,
        *,
        scope: str | None = None,
        sensitivity: str | None = None,
        tags: Sequence[str] | None = None,
        actor: str | None = None,
    ) -> Record:
        options = _Requests.options(scope, sensitivity, tags, actor)
        return Record.from_json(await self._call(*_Requests.remember_fact(subject, predicate, obj, options)))

    async def recall(
        self,
        query: str = "",
        *,
        limit: int = 10,
        types: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        user: str | None = None,
        tags: Sequence[str] | None = None,
        since: str | None = None,
        until: str | None = None,
        include_tombstones: bool = False,
    ) -> list[Hit]:
        request = _Requests.recall(query, limit, types, scopes, user, tags, since, until, include_tombstones)
        return [Hit.from_json(h) for h in (await self._call(*request))["hits"]]

    async def get(self, record_id: str) -> Record:
        return Record.from_json(await self._call("GET", f"/v1/records/{record_id}"))

    async def history(self, record_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/v1/records/{record_id}/history")

    async def supersede(self, record_id: str, payload: dict[str, Any], *, rationale: str, actor: str = "client") -> Record:
        body = {"change": {"payload": payload}, "actor": actor, "rationale": rationale}
        return Record.from_json(await self._call(*_Requests.revise(record_id, "supersede", body)))

    async def retract(self, record_id: str, *, rationale: str, actor: str = "client") -> Record:
        return Record.from_json(await self._call(*_Requests.revise(record_id, "retract", {"actor": actor, "rationale": rationale})))

    async def contest(self, record_id: str, *, rationale: str, claim: str | None = None, actor: str = "client") -> Record:
        body = _drop_none({"claim": claim, "actor": actor, "rationale": rationale})
        return Record.from_json(await self._call(*_Requests.revise(record_id, "contest", body)))

    async def reinforce(self, record_id: str, *, rationale: str = "", actor: str = "client") -> Record:
        return Record.from_json(await self._call(*_Requests.revise(record_id, "reinforce", {"actor": actor, "rationale": rationale})))

    async def forget(
        self,
        *,
        ids: Sequence[str] | None = None,
        query: str | None = None,
        subject: str | None = None,
        user: str | None = None,
        reason: str = "",
        dry_run: bool = False,
    ) -> ForgetReport:
        return ForgetReport.from_json(await self._call(*_Requests.forget(ids, query, subject, user, reason, dry_run)))

    async def hook(self, name: str, event: dict[str, Any]) -> HookOutcome:
        return HookOutcome.from_json(await self._call(*_Requests.hook(name, event)))
