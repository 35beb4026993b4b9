#!/usr/bin/env python3
"""The Claude Code session-start hook as a process, with and without the agent-start sync.

Usage: python3 crates/mneme-bench/scripts/session_start_sync.py [target/release/mneme]
"""
import os, subprocess, tempfile, time, statistics, sys
mneme = sys.argv[1] if len(sys.argv) > 1 else "target/release/mneme"
home = tempfile.mkdtemp(prefix="mneme-ss-")
env = dict(os.environ, MNEME_HOME=home)
subprocess.run([mneme, "init"], env=env, capture_output=True, check=True)
subprocess.run([mneme, "workspace", "init"], env=env, capture_output=True, check=True)
def run(extra, n):
    out=[]
    for _ in range(n):
        t=time.perf_counter(); subprocess.run([mneme, *extra, "claude-hook", "session-start"], env=env, capture_output=True, check=True); out.append((time.perf_counter()-t)*1000)
    return out
a,b=[],[]
for _ in range(5):
    a+=run([],10); b+=run(["--set","workspace.sync_on_start=false"],10)
q=lambda v:(statistics.median(v), sorted(v)[int(len(v)*0.99)-1])
print("session-start with sync: p50 %.2f p99 %.2f" % q(a)); print("session-start, sync off: p50 %.2f p99 %.2f" % q(b))
import shutil; shutil.rmtree(home)
