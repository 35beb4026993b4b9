#!/usr/bin/env python3
"""How many of a split's changes and corrections one message's reading gives.

For every `change` and `correct` event in a truth split's fact histories, the message is
read by `mneme-bench extract --read` with the value it replaces as held (`text<TAB>slot=old`),
and counted as read when a phrase's claim (its slot, or a bare correction's) or the
encoder's accepted reading (its slot) gives the new value. No store, no reconciler: this
measures the reading of one message, not what the conversation ends with (truth_eval does).

    python3 bench/truth/changes.py SPLIT.json [--bin target/release/mneme-bench] [--show]
"""
import argparse, collections, json, os, subprocess, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("split")
ap.add_argument("--bin", default="target/release/mneme-bench")
ap.add_argument("--show", action="store_true", help="print every event not read")
args = ap.parse_args()
events = []
for c in json.load(open(args.split))["conversations"]:
    turns = {t["id"]: t for t in c["turns"]}
    for f in c["truth"]:
        for h in f["history"]:
            if h["event"] in ("change", "correct") and h.get("old"):
                text = turns[h["turn"]]["text"].replace("\n", " ").replace("\t", " ")
                events.append((f["slot"], h["event"], h["value"], h["old"], text))
lines = "".join(f"{text}\t{slot}={old}\n" for slot, _, _, old, text in events)
with tempfile.TemporaryDirectory() as home:
    out = subprocess.run([args.bin, "extract", "--read"], input=lines, capture_output=True, text=True, check=True,
                         env=dict(os.environ, MNEME_HOME=home)).stdout
readings = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
norm = lambda v: (v or "").lower().strip(" .!")
counts = collections.Counter()
for (slot, kind, value, old, text), x in zip(events, readings):
    claims = [c for c in x["claims"] if c["op"] in ("set", "add") and c.get("other") is None]
    r = x["reading"] or {}
    hit = [c for c in claims if norm(value) in norm(c["value"])]
    if hit:
        how = "phrase" if hit[0]["slot"] in (slot, None) else "phrase, other slot"
    elif claims:
        how = "phrase, other value"
    elif r.get("accepted") and norm(value) in norm(r.get("value")):
        how = "read" if r.get("slot") == slot else "read, other slot"
    elif r.get("accepted"):
        how = "read, other value"
    else:
        how = "not read"
    counts[how] += 1
    if args.show and how not in ("phrase", "read"):
        print(f"{how:20} [{slot}] {value!r} <- {old!r}: {text[:110]!r}")
ok = counts["phrase"] + counts["read"]
print(f"{args.split}: {len(events)} changes and corrections, {ok} read ({100 * ok / max(len(events), 1):.1f} %);", dict(counts))
