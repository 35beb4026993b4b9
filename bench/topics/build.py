#!/usr/bin/env python3
"""Builds the topic classifier's labelled sets from the truth benchmark's generator.

Every user turn of a generated conversation is labelled with the slot it states (the turn
is in a fact's `history`) or `null` (chit-chat, third-party facts, hypotheticals, the
user's own questions); every harness question is labelled with its slot. Standard library
only; deterministic.

    python3 bench/topics/build.py            # -> bench/topics/train.jsonl, tune.jsonl, heldout.jsonl

train.jsonl:   the dev template family (seeds 1-3), families B and C, the even halves
               of paraphrases.jsonl and paraphrases_changes.jsonl, and two thirds of
               paraphrases_{casual,embedded,confusable}.jsonl (all hand-written,
               independent of every template family).
tune.jsonl:    family E (seed 5) and the odd half of paraphrases_changes.jsonl: what the
               layer's size, decay and threshold were chosen on.
heldout.jsonl: family D (never trained on, never tuned on), the odd half of
               paraphrases.jsonl and the held third of each session-30 file. `mneme-bench topics eval` reports each.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
GENERATOR = ROOT.parent / "shared" / "bench" / "truth" / "generate.py"


def generated(templates: str | None, seed: int, n: int, family: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "data.json"
        args = [sys.executable, str(GENERATOR), "--seed", str(seed), "--n", str(n), "--out", str(out)]
        args += ["--split", "test", "--templates", templates] if templates else ["--split", "dev"]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        data = json.loads(out.read_text())
    rows = []
    for c in data["conversations"]:
        slot_of = {}
        for fact in c["truth"]:
            for h in fact["history"]:
                slot_of.setdefault(h["turn"], fact["slot"])
            rows.append({"text": fact["question"], "slot": fact["slot"], "kind": "question", "family": family})
        for t in c["turns"]:
            if t["role"] == "user":
                rows.append({"text": t["text"], "slot": slot_of.get(t["id"]), "kind": "turn", "family": family})
    return rows


def paraphrases(name: str = "paraphrases.jsonl", family: str = "paraphrases", parts: int = 2) -> tuple[list[dict], list[dict]]:
    """The file's rows split by a hash of their text: one part in `parts` held apart."""
    train, held = [], []
    path = HERE / name
    if not path.exists():
        print(f"warning: {path} is missing; the sets leave it out", file=sys.stderr)
        return train, held
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        row = {"text": row["text"], "slot": row["slot"], "kind": row.get("kind", "turn"), "family": family}
        # A stable part by content, not by position: the split survives edits to the file.
        (held if hashlib.sha256(row["text"].encode()).digest()[0] % parts == 1 else train).append(row)
    return train, held


def dedup(rows: list[dict]) -> list[dict]:
    seen, out = set(), []
    for r in rows:
        key = r["text"].strip().lower()
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    by = {}
    for r in rows:
        by[r["family"]] = by.get(r["family"], 0) + 1
    print(f"{path.name}: {len(rows)} rows {by}")


def main() -> None:
    train = []
    for seed in (1, 2, 3):
        train += generated(None, seed, 40, "dev")
    train += generated(str(ROOT / "bench/truth/family_b.py"), 2, 40, "B")
    train += generated(str(ROOT / "bench/truth/family_c.py"), 3, 40, "C")
    para_train, para_held = paraphrases()
    changes_train, changes_tune = paraphrases("paraphrases_changes.jsonl", "changes")
    train += para_train + changes_train
    # Session 30's three sets (casual changes, changes inside longer messages, look-alikes
    # and questions): two thirds train, one third is held out.
    s30_held = []
    for name in ("casual", "embedded", "confusable", "indirect", "indirect_b"):
        part_train, part_held = paraphrases(f"paraphrases_{name}.jsonl", name, parts=3)
        train += part_train
        s30_held += part_held
    held = generated(str(ROOT / "bench/truth/family_d.py"), 4, 40, "D") + para_held + s30_held
    tune = generated(str(ROOT / "bench/truth/family_e.py"), 5, 40, "E") + changes_tune
    write(HERE / "train.jsonl", dedup(train))
    seen = {r["text"].strip().lower() for r in train}
    write(HERE / "heldout.jsonl", [r for r in dedup(held) if r["text"].strip().lower() not in seen])
    write(HERE / "tune.jsonl", [r for r in dedup(tune) if r["text"].strip().lower() not in seen])


if __name__ == "__main__":
    main()
