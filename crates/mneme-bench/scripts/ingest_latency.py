#!/usr/bin/env python3
"""One HTTP ingest at a time against a fresh daemon: what a single write costs.

Usage: MNEME_MODEL_DIR=... python3 crates/mneme-bench/scripts/ingest_latency.py [target/release/mneme] [turns.txt]

Starts `mneme up` in a temporary MNEME_HOME on ports 18799/19099, POSTs the first 300
lines of the turns file (one LoCoMo turn per line, see BENCHMARKS.md) to
/v1/ingest/event one by one, pausing 0.2 s after every ten so the backfill is idle when
writes arrive, and prints p50 and p99 in ms with the embedding status afterwards.
"""
import json, os, statistics, subprocess, sys, tempfile, time, urllib.request

mneme = sys.argv[1] if len(sys.argv) > 1 else "target/release/mneme"
turns = sys.argv[2] if len(sys.argv) > 2 else "/tmp/locomo_turns.txt"
home = tempfile.mkdtemp(prefix="mneme-ingest-")
env = dict(os.environ, MNEME_HOME=home)
subprocess.run([mneme, "init"], env=env, capture_output=True, check=True)
subprocess.run([mneme, "up", "--http-addr", "127.0.0.1:18799", "--grpc-addr", "127.0.0.1:19099"], env=env, capture_output=True, check=True)
base = "http://127.0.0.1:18799"
try:
    time.sleep(1.5)
    lines = [l.strip() for l in open(turns) if l.strip()][:300]
    times = []
    for i, text in enumerate(lines):
        body = json.dumps({"event": {"event_kind": "message", "text": text}}).encode()
        started = time.perf_counter()
        urllib.request.urlopen(urllib.request.Request(f"{base}/v1/ingest/event", data=body, headers={"content-type": "application/json"})).read()
        times.append((time.perf_counter() - started) * 1000)
        if i % 10 == 9:
            time.sleep(0.2)
    times.sort()
    embedding = json.load(urllib.request.urlopen(f"{base}/v1/status"))["embedding"]
    print(f"{mneme}: ingest p50 {statistics.median(times):.2f} ms, p99 {times[max(0, int(len(times) * 0.99) - 1)]:.2f} ms; embedding {embedding}")
finally:
    subprocess.run([mneme, "down"], env=env, capture_output=True)
