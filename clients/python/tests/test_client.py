"""The client against a live daemon: ``MNEME_URL`` and ``MNEME_API_KEY`` name it (mneme's
test suite starts one; see crates/mneme/tests/it/clients.rs)."""

import asyncio
import os

import pytest

from mneme_client import AsyncClient, Client, MnemeError

URL = os.environ["MNEME_URL"]
KEY = os.environ["MNEME_API_KEY"]


@pytest.fixture
def mneme():
    with Client(URL, api_key=KEY) as client:
        yield client


def test_health_needs_no_key():
    with Client(URL) as anonymous:
        assert anonymous.health()["service"] == "mneme"


def test_a_wrong_key_is_refused():
    with Client(URL, api_key="not-the-key-0123456789") as wrong:
        with pytest.raises(MnemeError) as refused:
            wrong.recall("anything")
    assert refused.value.status == 401 and refused.value.code == "unauthenticated"


def test_remember_then_recall(mneme):
    record = mneme.remember("The staging database moved to Frankfurt", sender="ops", scope="user:ops-team", tags=["infra"])
    assert record.memory_type == "episodic" and record.scope == "user:ops-team"
    hits = mneme.recall("where is the staging database", user="ops-team")
    assert hits and hits[0].record.id == record.id
    assert "Frankfurt" in hits[0].record.text
    assert isinstance(hits[0].score, float)


def test_private_spans_are_never_stored(mneme):
    record = mneme.remember("my PIN is <private>4711</private> ok")
    assert "4711" not in record.text


def test_a_fact_is_superseded_with_its_history(mneme):
    fact = mneme.remember_fact("dana", "lives in", "Berlin", scope="user:dana")
    payload = dict(fact.payload or {})
    payload["object"] = "Hamburg"
    newer = mneme.supersede(fact.id, payload, rationale="dana moved")
    assert newer.text == "dana lives in Hamburg"
    assert mneme.get(fact.id).status == "superseded"
    assert "dana moved" in str(mneme.history(fact.id))
    retracted = mneme.retract(newer.id, rationale="said in jest")
    assert retracted.status == "retracted"


def test_forget_plans_then_erases(mneme):
    mneme.remember("the locker code is 1234 for the gym", scope="user:gym")
    plan = mneme.forget(query="locker code", reason="asked to", dry_run=True)
    assert plan.dry_run and plan.ids
    done = mneme.forget(query="locker code", reason="asked to")
    assert set(done.ids) == set(plan.ids)
    assert not [h for h in mneme.recall("locker code", user="gym") if "1234" in h.record.text]
    with pytest.raises(ValueError):
        mneme.forget(reason="nothing chosen")


def test_hooks(mneme):
    out = mneme.hook("message_received", {"event": {"content": "I prefer tea over coffee", "from": "sam"}})
    assert out.error is None and out.record_ids
    start = mneme.hook("session_start", {"event": {}, "ctx": {"sessionKey": "s1"}})
    assert start.error is None
    with pytest.raises(ValueError):
        mneme.hook("no_such_hook", {})


def test_errors_name_what_was_wrong(mneme):
    with pytest.raises(MnemeError) as missing:
        mneme.get("01a00000-0000-7000-8000-000000000000")
    assert missing.value.status == 404 and missing.value.code == "not_found"
    with pytest.raises(MnemeError) as bad:
        mneme.recall("x", limit=5000)
    assert bad.value.code == "invalid_argument" and "limit" in bad.value.message


def test_the_async_client_does_the_same():
    async def flow():
        async with AsyncClient(URL, api_key=KEY) as mneme:
            record = await mneme.remember("Async notes: the release train leaves on Thursdays", scope="user:rel")
            hits = await mneme.recall("when does the release train leave", user="rel")
            assert hits and hits[0].record.id == record.id
            fact = await mneme.remember_fact("release", "leaves on", "Thursday", scope="user:rel")
            assert (await mneme.get(fact.id)).text == "release leaves on Thursday"
            plan = await mneme.forget(ids=[record.id], reason="test", dry_run=True)
            assert plan.ids == [record.id]
            with pytest.raises(MnemeError):
                await mneme.get("not-an-id")

    asyncio.run(flow())
