#!/usr/bin/env python3
"""Builds the old-value head's training rows (`olds_train.jsonl`) for `mneme-bench spans
--old-data`: messages labelled with the words that name the value they replace.

From the truth generator's families the topic layer trains on (dev seeds 1-3, B seed 2,
C seed 3; see ../build.py), every user turn in a fact's history: a change or correction
whose text names the old value gives that value (`"old"`); a first statement gives none.
To these the hand-written swaps of `swaps_a.jsonl` and the even half of `swaps_c.jsonl`
(by a hash of the text) are added: a swap names its old value; a restatement names the
held value as still current (`"kind": "restate"`, no old value). The odd half of
`swaps_c.jsonl` tunes the head's threshold; `swaps_b.jsonl` is never used here.

    python3 bench/topics/spans/olds.py > bench/topics/spans/olds_train.jsonl
    python3 bench/topics/spans/olds.py --tune > /tmp/swaps_c_odd.jsonl   # the odd half

Standard library only, deterministic.
"""
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
GENERATOR = ROOT.parent / "shared" / "bench" / "truth" / "generate.py"


def generated(templates, seed, family):
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "split.json"
        args = [sys.executable, str(GENERATOR), "--seed", str(seed), "--n", "40", "--out", str(out)]
        if templates:
            args += ["--split", "test", "--templates", templates]
        subprocess.run(args, check=True, capture_output=True)
        data = json.loads(out.read_text())
    rows, seen = [], set()
    for conv in data["conversations"]:
        text_of = {t["id"]: t["text"] for t in conv["turns"]}
        for fact in conv["truth"]:
            for h in fact["history"]:
                text = text_of.get(h["turn"])
                if text is None or text in seen:
                    continue
                old = h.get("old")
                if old and not re.search(r"(?<!\w)" + re.escape(old) + r"(?!\w)", text):
                    old = None
                if h["event"] in ("change", "correct") and not old:
                    # A change that does not name the old value says nothing about old words.
                    continue
                seen.add(text)
                rows.append({"text": text, "slot": fact["slot"], "value": None, "old": old,
                             "kind": "swap" if old else "state", "source": f"family {family}"})
    return rows


def train_half(text):
    """The even half of a file, by the first byte of the text's SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).digest()[0] % 2 == 0


def main():
    if sys.argv[1:] == ["--tune"]:
        for line in open(HERE / "swaps_c.jsonl", encoding="utf-8"):
            if not train_half(json.loads(line)["text"]):
                print(line, end="")
        return
    rows = []
    for seed in (1, 2, 3):
        rows += generated(None, seed, "dev")
    rows += generated(str(ROOT / "bench/truth/family_b.py"), 2, "B")
    rows += generated(str(ROOT / "bench/truth/family_c.py"), 3, "C")
    for name in ("swaps_a.jsonl", "swaps_c.jsonl"):
        for line in open(HERE / name, encoding="utf-8"):
            r = json.loads(line)
            if r["kind"] == "other" or (name == "swaps_c.jsonl" and not train_half(r["text"])):
                continue
            rows.append({"text": r["text"], "slot": r["slot"], "value": None, "old": r["old"],
                         "kind": r["kind"], "source": name})
    for r in rows:
        print(json.dumps(r, ensure_ascii=False))


if __name__ == "__main__":
    main()
