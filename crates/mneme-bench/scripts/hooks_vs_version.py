#!/usr/bin/env python3
"""Claude Code's hooks as processes beside `mneme --version` (the process-start baseline).

Usage: python3 crates/mneme-bench/scripts/hooks_vs_version.py [target/release/mneme] [rounds] [--daemon]

Makes a store and a workspace in a temporary MNEME_HOME, then runs each command once per
round, interleaved, so a busy machine slows them alike; prints each command's p50 and p99
in ms and its ratios to `--version`'s. Without `--daemon` no daemon runs (each hook opens
the store); with it, `mneme up` starts one on free ports first (the store hooks forward
to it) and `mneme down` stops it at the end. The daemon has the model it finds
(MNEME_MODEL_DIR, else the user's cache); MNEME_EMBEDDING_PROVIDER=none runs it without.
"""
import json, os, socket, statistics, subprocess, sys, tempfile, time

args = [a for a in sys.argv[1:] if a != "--daemon"]
daemon = "--daemon" in sys.argv[1:]
mneme = args[0] if args else "target/release/mneme"
rounds = int(args[1]) if len(args) > 1 else 100
home = tempfile.mkdtemp(prefix="mneme-hooks-")
env = dict(os.environ, MNEME_HOME=home)
env.pop("MNEME_CONFIG", None)
subprocess.run([mneme, "init"], env=env, capture_output=True, check=True)
subprocess.run([mneme, "workspace", "init"], env=env, capture_output=True, check=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if daemon:
    env.update(MNEME_HTTP_ADDR=f"127.0.0.1:{free_port()}", MNEME_GRPC_ADDR=f"127.0.0.1:{free_port()}")
    subprocess.run([mneme, "up"], env=env, capture_output=True, check=True)

commands = {
    "--version": ([mneme, "--version"], None),
    "session-start": ([mneme, "claude-hook", "session-start"], lambda i: {"session_id": f"s{i}", "source": "startup"}),
    "prompt-submit": ([mneme, "claude-hook", "prompt-submit"], lambda i: {"session_id": f"s{i}", "prompt": f"I moved to Lisbon {i} weeks ago, what should I pack?"}),
    "context": ([mneme, "claude-hook", "context", "--usage", "40"], lambda i: {"session_id": f"s{i}"}),
    "session-end": ([mneme, "claude-hook", "session-end"], lambda i: {"session_id": f"s{i}", "reason": "exit"}),
    # The generic hook command (OpenClaw-style hosts), for comparison.
    "hook message": ([mneme, "hook", "message_received"], lambda i: {"content": f"Nginx serves the docs site {i}", "sessionId": f"s{i}"}),
}
times = {name: [] for name in commands}
for i in range(rounds):
    for name, (argv, body) in commands.items():
        data = json.dumps(body(i)).encode() if body else b""
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, input=data, capture_output=True)
        times[name].append((time.perf_counter() - started) * 1000)
        if done.returncode != 0:
            sys.exit(f"{name} failed: {done.stderr.decode()}")
if daemon:
    subprocess.run([mneme, "down"], env=env, capture_output=True, check=True)


def q(v):
    v = sorted(v)
    return statistics.median(v), v[max(0, int(len(v) * 0.99) - 1)]


base50, base99 = q(times["--version"])
print(f"{rounds} interleaved rounds, {'a daemon running' if daemon else 'no daemon'}, load {os.getloadavg()[0]:.2f}")
print(f"{'command':<15} {'p50 ms':>8} {'p99 ms':>8} {'p50 ×':>7} {'p99 ×':>7}")
for name, v in times.items():
    p50, p99 = q(v)
    print(f"{name:<15} {p50:8.2f} {p99:8.2f} {p50 / base50:7.2f} {p99 / base99:7.2f}")
