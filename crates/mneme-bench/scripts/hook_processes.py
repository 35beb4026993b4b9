#!/usr/bin/env python3
"""The Claude Code prompt hook as a process, with and without the inner life's state write.

Usage: python3 crates/mneme-bench/scripts/hook_processes.py [target/release/mneme]

Makes a store and a workspace in a temporary MNEME_HOME, then times
`mneme claude-hook prompt-submit` in interleaved rounds: with the workspace's `memory/`
(the hook records a user message in memory/inner-state.json) and without it (moved aside).
"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

mneme = sys.argv[1] if len(sys.argv) > 1 else "target/release/mneme"
home = tempfile.mkdtemp(prefix="mneme-hooks-")
env = dict(os.environ, MNEME_HOME=home)
subprocess.run([mneme, "init"], env=env, capture_output=True, check=True)
subprocess.run([mneme, "workspace", "init"], env=env, capture_output=True, check=True)
memory = os.path.join(home, "workspace", "memory")


def run(n):
    out = []
    for i in range(n):
        started = time.perf_counter()
        prompt = json.dumps({"prompt": f"hello {i}"}).encode()
        subprocess.run([mneme, "claude-hook", "prompt-submit"], env=env, input=prompt, capture_output=True, check=True)
        out.append((time.perf_counter() - started) * 1000)
    return out


with_state, without = [], []
for _ in range(4):
    with_state += run(15)
    shutil.move(memory, memory + ".off")
    without += run(15)
    shutil.move(memory + ".off", memory)


def q(v):
    v = sorted(v)
    return statistics.median(v), v[int(len(v) * 0.99) - 1]


print("prompt-submit, inner state recorded: p50 %.2f ms  p99 %.2f ms" % q(with_state))
print("prompt-submit, no memory/ directory: p50 %.2f ms  p99 %.2f ms" % q(without))
shutil.rmtree(home)
