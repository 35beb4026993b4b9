"""Drives mneme's MCP server with the official Python MCP SDK (PyPI `mcp`), a client
mneme did not write. Prints one JSON object with what it saw; the Rust test asserts on it.

    python mcp_client.py stdio MNEME_BIN DATA_DIR         scenario over stdio (`mneme mcp`)
    python mcp_client.py http URL [KEY]                   scenario over Streamable HTTP
    python mcp_client.py narrow URL KEY                   what a narrowed key may do
    python mcp_client.py bench-stdio MNEME_BIN DATA_DIR N  recall round trips over stdio
    python mcp_client.py bench-http URL N                 recall round trips over HTTP (MCP and /v1/retrieve)
"""

import json
import os
import statistics
import sys
import time

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def text_of(result):
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def call(session, name, args):
    result = await session.call_tool(name, args)
    return {
        "is_error": bool(result.is_error),
        "structured": result.structured_content,
        "text": text_of(result),
    }


async def scenario(session):
    out = {}
    init = await session.initialize()
    out["server"] = init.server_info.name
    out["instructions"] = init.instructions or ""
    tools = (await session.list_tools()).tools
    out["tools"] = {
        t.name: {
            "read_only": t.annotations.read_only_hint if t.annotations else None,
            "destructive": t.annotations.destructive_hint if t.annotations else None,
            "required": t.input_schema.get("required", []),
        }
        for t in tools
    }
    fact = await call(session, "remember_fact", {"subject": "dana", "predicate": "lives in", "object": "Berlin", "scope": "user:dana"})
    out["remember_fact"] = fact
    fact_id = fact["structured"]["record"]["id"]
    out["remember"] = await call(
        session, "remember", {"text": "Dana said <private>her PIN is 4711</private> she loves hiking", "sender": "dana", "scope": "user:dana"}
    )
    out["recall"] = await call(session, "recall", {"query": "where does dana live", "scopes": ["user:dana"]})
    out["correct"] = await call(session, "correct", {"id": fact_id, "object": "Hamburg", "rationale": "dana moved"})
    out["show_old"] = await call(session, "show", {"id": fact_id, "history": True})
    out["bad_limit"] = await call(session, "recall", {"query": "dana", "limit": 5000})
    out["unknown_arg"] = await call(session, "recall", {"qeury": "dana"})
    out["string_flag"] = await call(session, "reflection", {"op": "tick", "dry_run": "true"})
    steps = []

    async def on_progress(progress, total, message):
        steps.append([progress, total, message])

    await session.call_tool("reflection", {"op": "tick", "dry_run": True}, progress_callback=on_progress)
    out["tick_progress"] = steps
    out["missing_record"] = await call(session, "show", {"id": "01a00000-0000-7000-8000-000000000000"})
    out["pin_search"] = await call(session, "recall", {"query": "4711 PIN", "include_tombstones": True})
    out["session_context"] = await call(session, "session_context", {"user_id": "dana"})
    templates = (await session.list_resource_templates()).resource_templates
    out["templates"] = [t.uri_template for t in templates]
    new_id = out["correct"]["structured"]["record"]["id"]
    resource = await session.read_resource(f"mneme://records/{new_id}")
    out["resource"] = resource.contents[0].text
    out["resources"] = [str(r.uri) for r in (await session.list_resources()).resources]
    out["facts_resource"] = (await session.read_resource("mneme://users/dana/facts")).contents[0].text
    if "mneme://playbook" in out["resources"]:
        out["playbook_resource"] = (await session.read_resource("mneme://playbook")).contents[0].text
    files = [u for u in out["resources"] if u.startswith("mneme://workspace/")]
    if files:
        target = next((u for u in files if u.endswith("/notes.md")), files[0])
        out["file_text"] = (await session.read_resource(target)).contents[0].text
    try:
        await session.read_resource("mneme://workspace/../config.toml")
        out["escape"] = "read"
    except Exception as e:  # the SDK raises the server's error
        out["escape"] = f"refused: {e}"
    prompts = (await session.list_prompts()).prompts
    out["prompts"] = [p.name for p in prompts]
    prompt = await session.get_prompt("memory-sync", {"max_conversations": "7"})
    out["prompt_text"] = prompt.messages[0].content.text
    out["forget_dry_run"] = await call(session, "forget", {"query": "hiking", "dry_run": True, "reason": "test"})
    # Three long notes (190 KB each) come back compact: the answer stays under the SDK's
    # 1 MiB message limit.
    for n in range(3):
        await call(session, "remember", {"text": f"quarterly report {n}: " + "revenue grew in every region. " * 6300})
    out["long_recall"] = await call(session, "recall", {"query": "quarterly report revenue", "limit": 5})
    # An event the agent remembered wrong: corrected as a new event; retract is refused.
    typo = await call(session, "remember", {"text": "the standup moved to 10:30", "sender": "dana"})
    typo_id = typo["structured"]["record"]["id"]
    out["typo_id"] = typo_id
    out["correct_event"] = await call(session, "correct", {"id": typo_id, "text": "the standup moved to 9:30", "rationale": "misheard"})
    out["retract_event"] = await call(session, "retract", {"id": typo_id, "rationale": "wrong"})
    out["full_recall"] = await call(session, "recall", {"query": "where does dana live", "scopes": ["user:dana"], "full": True})
    return out


async def narrowed(session):
    """A key narrowed to scope user:alice at sensitivity low."""
    await session.initialize()
    out = {}
    out["own"] = await call(session, "remember_fact", {"subject": "alice", "predicate": "likes", "object": "tea", "scope": "user:alice"})
    out["other_scope"] = await call(session, "remember_fact", {"subject": "bob", "predicate": "likes", "object": "coffee", "scope": "user:bob"})
    out["recall"] = await call(session, "recall", {"query": "likes", "limit": 50})
    out["forget"] = await call(session, "forget", {"query": "coffee", "dry_run": True})
    out["search_files"] = await call(session, "search_files", {"query": "profile"})
    out["resources"] = [str(r.uri) for r in (await session.list_resources()).resources]
    return out


def http_client(key):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0))


async def over_http(url, key, body):
    async with http_client(key) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                return await body(session)


async def over_stdio(binary, data_dir, body):
    env = dict(os.environ)
    env["MNEME_HOME"] = data_dir
    params = StdioServerParameters(command=binary, args=["mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            return await body(session)


def percentiles(samples):
    samples = sorted(samples)
    return {"n": len(samples), "p50_ms": statistics.median(samples), "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))]}


def bench(n):
    async def body(session):
        await session.initialize()
        for i in range(50):
            await session.call_tool("remember", {"text": f"note {i}: the deploy of service {i} went fine"})
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            await session.call_tool("recall", {"query": f"deploy of service {i % 50}", "limit": 10})
            times.append((time.perf_counter() - t0) * 1000)
        return percentiles(times)

    return body


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        out = await over_stdio(sys.argv[2], sys.argv[3], scenario)
    elif mode == "http":
        out = await over_http(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None, scenario)
    elif mode == "narrow":
        out = await over_http(sys.argv[2], sys.argv[3], narrowed)
    elif mode == "bench-stdio":
        out = {"mcp_stdio": await over_stdio(sys.argv[2], sys.argv[3], bench(int(sys.argv[4])))}
    elif mode == "bench-http":
        url, n = sys.argv[2], int(sys.argv[3])
        out = {"mcp_http": await over_http(url, None, bench(n))}
        base = url.rsplit("/mcp", 1)[0]
        async with http_client(None) as http:
            times = []
            for i in range(n):
                t0 = time.perf_counter()
                r = await http.post(f"{base}/v1/retrieve", json={"query": f"deploy of service {i % 50}", "limit": 10})
                r.raise_for_status()
                times.append((time.perf_counter() - t0) * 1000)
        out["http_retrieve"] = percentiles(times)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(out))


anyio.run(main)
