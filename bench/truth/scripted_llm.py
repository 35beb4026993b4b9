#!/usr/bin/env python3
"""A loopback OpenAI-compatible endpoint scripted to act as the LLM for `mneme-bench truth`.

    python3 bench/truth/scripted_llm.py --mode decide --port 8799 &
    python3 ../shared/bench/truth/truth_eval.py --system \
      "target/release/mneme-bench --set consolidation.llm_endpoint=http://127.0.0.1:8799/v1 truth"

Modes (standard library only):
  none     every answer is {"memory": []}: the model decides nothing (the pipeline with an LLM
           in the loop, no help from it).
  decide   a scripted "model" that reads the prompt mneme sends (known facts F1..Fn, dated
           lines with speakers) and, for each known fact whose value a later user line says
           is gone (a negation before the value in one clause: "no longer", "not ... anymore",
           "left", "quit"), answers DELETE; else NONE.
           It exercises ids, validation and the latest-statement-wins rule.
  garbage  every answer is prose that is not JSON: mneme must fall back to its offline
           extraction and back off.
Prints "listening on PORT" to stderr and serves until killed.
"""
import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NEGATION = re.compile(r"\b(no longer|not .* anymore|don't .* anymore|left|quit|gave up)\b", re.I)


def decide(prompt: str) -> dict:
    known = re.findall(r"^F(\d+): (.+?) \(since", prompt, re.M)
    lines = re.findall(r"^\[[^\]]+\] [^:]*\(user\): (.+)$", prompt, re.M)
    memory = []
    for fid, fact in known:
        value = fact.split()[-1].lower()
        # The negation and the value in one clause, the negation first.
        clauses = [c for l in lines for c in re.split(r"[,;:]", l)]
        hit = any(value in c.lower() and (m := NEGATION.search(c)) and m.start() < c.lower().index(value) for c in clauses)
        memory.append({"event": "DELETE" if hit else "NONE", "id": f"F{fid}", "reason": "scripted"})
    return {"memory": memory}


class Handler(BaseHTTPRequestHandler):
    mode = "none"

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        prompt = body.get("messages", [{}, {}])[-1].get("content", "")
        if self.mode == "garbage":
            content = "I'm sorry, I can't produce JSON today."
        elif self.mode == "decide":
            content = json.dumps(decide(prompt))
        else:
            content = json.dumps({"memory": []})
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["none", "decide", "garbage"], default="none")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    Handler.mode = a.mode
    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(f"listening on {server.server_address[1]}", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
