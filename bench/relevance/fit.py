#!/usr/bin/env python3
"""Fit and check mneme's calibrated relevance (`ScoreParts::relevant`) on LoCoMo.

Plays every LoCoMo dev conversation into `mneme-bench retrieval` and asks, with
`"explain": true`, (a) its own questions (categories 1-4), labelling each of the top
`--k` hits relevant when it is one of the question's evidence turns, and (b) questions
of *another* conversation (about people and events never mentioned here), every hit of
which is not relevant: what "nothing relevant" must answer empty.

Conversations are split in two by their order: the first half fits the logistic
weights (`--fit`), the second half checks them. The check reports how calibrated the
probabilities are (predicted against observed, by bin), and for floors on `relevant`:
how many gold turns in the top 10 are kept (R@10 kept) and how many foreign questions
answer empty.

    python3 bench/relevance/fit.py --system "target/release/mneme-bench retrieval" [--fit]
"""
import argparse
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "bench")
sys.path.insert(0, SHARED)
import locomo_retrieval as lr  # noqa: E402


def run(system, tasks, qinfo, k, foreign_per_conv):
    proc = subprocess.Popen(system, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(req):
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    ask({"op": "hello", "protocol": 1})
    rows = []  # (conversation index, kind, qid, [(id, parts, label)])
    for ci, t in enumerate(tasks):
        ask({"op": "corpus", "corpus_id": t.corpus_id, "docs": t.docs})
        for q in t.queries:
            r = ask({"op": "query", "corpus_id": t.corpus_id, "qid": q["qid"], "query": q["query"], "k": k, "explain": True})
            gold = set(qinfo[q["qid"]]["gold"])
            rows.append((ci, "own", q["qid"], [(i, p, i in gold) for i, p in zip(r["ids"], r.get("parts", []))]))
        other = tasks[(ci + 1) % len(tasks)]
        for q in other.queries[:foreign_per_conv]:
            r = ask({"op": "query", "corpus_id": t.corpus_id, "qid": "x" + q["qid"], "query": q["query"], "k": k, "explain": True})
            rows.append((ci, "foreign", q["qid"], [(i, p, False) for i, p in zip(r["ids"], r.get("parts", []))]))
        ask({"op": "drop", "corpus_id": t.corpus_id})
    ask({"op": "end"})
    proc.wait()
    return rows


def features(p, model):
    cov = p.get("coverage") or 0.0
    if model and p.get("cosine") is not None:
        return [1.0, p["cosine"], cov]
    return [1.0, cov]


def solve(a, b):
    """Solves a·x = b (Gaussian elimination with partial pivoting; a is small)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for k in range(c, n + 1):
                m[r][k] -= f * m[c][k]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][k] * x[k] for k in range(r + 1, n))) / m[r][r]
    return x


def fit(xs, ys, l2=1e-3, rounds=25):
    """Logistic regression by Newton's method (iteratively reweighted least squares)."""
    d = len(xs[0])
    w = [0.0] * d
    for _ in range(rounds):
        g = [l2 * wj for wj in w]
        h = [[l2 if i == j else 0.0 for j in range(d)] for i in range(d)]
        for x, y in zip(xs, ys):
            p = 1 / (1 + math.exp(-sum(a * b for a, b in zip(w, x))))
            for i in range(d):
                g[i] += (p - y) * x[i]
                for j in range(d):
                    h[i][j] += p * (1 - p) * x[i] * x[j]
        step = solve(h, g)
        w = [wj - sj for wj, sj in zip(w, step)]
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--foreign", type=int, default=20, help="foreign questions per conversation")
    ap.add_argument("--fit", action="store_true", help="fit the weights on the first half and print them")
    ap.add_argument("--model", action="store_true", help="the system runs with the embedding model (cosine is a feature)")
    ap.add_argument("--rows", default=None, help="read the hits from this file if it exists, else write them there")
    args = ap.parse_args()
    data = json.load(open(os.path.join(SHARED, "data", "locomo-dev.json")))
    tasks, qinfo, _ = lr.build_tasks(data, {1, 2, 3, 4}, False, None, 0)
    if args.rows and os.path.exists(args.rows):
        rows = json.load(open(args.rows))
    else:
        rows = run(args.system, tasks, qinfo, args.k, args.foreign)
        if args.rows:
            json.dump(rows, open(args.rows, "w"))
    half = len(tasks) // 2
    fit_rows = [r for r in rows if r[0] < half]
    check_rows = [r for r in rows if r[0] >= half]
    if args.fit:
        xs, ys = [], []
        for _, _, _, hits in fit_rows:
            for _, p, y in hits:
                if p.get("slot") is None and (not args.model or p.get("cosine") is not None):
                    xs.append(features(p, args.model))
                    ys.append(1.0 if y else 0.0)
        w = fit(xs, ys)
        print(json.dumps({"weights": [round(v, 3) for v in w], "examples": len(xs), "positives": int(sum(ys))}))
        return
    # Calibration on the check half: predicted against observed by bin.
    bins = [[0, 0, 0.0] for _ in range(10)]
    for _, _, _, hits in check_rows:
        for _, p, y in hits:
            r = p.get("relevant")
            if r is None:
                continue
            b = min(int(r * 10), 9)
            bins[b][0] += 1
            bins[b][1] += int(y)
            bins[b][2] += r
    print("| relevant | hits | mean predicted | observed |")
    print("|---|---:|---:|---:|")
    for i, (n, pos, s) in enumerate(bins):
        if n:
            print(f"| {i / 10:.1f}-{(i + 1) / 10:.1f} | {n} | {s / n:.3f} | {pos / n:.3f} |")
    print()
    print("| floor | R@10 kept (own, check half) | gold turns lost | foreign questions answered empty | own questions answered empty |")
    print("|---:|---:|---:|---:|---:|")
    for floor in [0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3]:
        gold_total = gold_kept = 0
        own_empty = own_n = foreign_empty = foreign_n = 0
        for _, kind, qid, hits in check_rows:
            kept = [(i, p, y) for i, p, y in hits if p.get("slot") is not None or (p.get("relevant") or 0) >= floor]
            if kind == "own":
                gold = qinfo[qid]["gold"]
                gold_total += len(gold)
                gold_kept += sum(1 for i, _, y in kept[:10] if y)
                own_n += 1
                own_empty += int(not kept)
            else:
                foreign_n += 1
                foreign_empty += int(not kept)
        print(f"| {floor:.2f} | {100 * gold_kept / max(gold_total, 1):.1f} | {gold_total - gold_kept} | {100 * foreign_empty / max(foreign_n, 1):.1f} ({foreign_empty}/{foreign_n}) | {100 * own_empty / max(own_n, 1):.1f} |")


if __name__ == "__main__":
    main()
