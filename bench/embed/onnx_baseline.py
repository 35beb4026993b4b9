"""ONNX Runtime baseline for all-MiniLM-L6-v2 sentence embeddings (CPU).

Same texts and pipeline as `mneme-bench embed`: WordPiece tokens from our
tokenizer.json (truncation 256, no padding in the tokenizer), batches of
--batch texts, each batch sorted by token length and cut into forward passes
with mneme-embed's rule (<= 64 texts, <= 4096 padded tokens, next text at most
a quarter + 4 tokens longer than the pass's shortest), each pass padded to its
own longest; mean pooling over the attention mask, L2 normalisation.  Passes
run one after the other; ONNX Runtime spreads each over --threads threads.

Reports texts/s (wall), CPU ms per text (process user+sys, all threads, model
load and warm-up excluded), single-text latency p50/p99 (tokenise + run +
pool, one text per run) and, with --reference-npy, cosine agreement.
Needs only onnxruntime, tokenizers and numpy.
"""
import argparse
import json
import os
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

GROUP_TEXTS, GROUP_TOKENS = 64, 4096


def length_groups(order, lengths):
    """mneme-embed's `length_groups`: cut length-sorted indexes into passes."""
    groups, start = [], 0
    for end in range(1, len(order) + 1):
        if end < len(order):
            shortest, nxt, count = lengths[order[start]], lengths[order[end]], end - start + 1
            if count <= GROUP_TEXTS and count * nxt <= GROUP_TOKENS and nxt <= shortest + shortest // 4 + 4:
                continue
        groups.append(order[start:end])
        start = end
    return groups


class Embedder:
    def __init__(self, model, tokenizer, threads, spin):
        self.tok = Tokenizer.from_file(tokenizer)
        self.tok.no_padding()
        self.tok.enable_truncation(max_length=256)
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        self.sess = ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.sess.get_inputs()}

    def run(self, encs):
        L = max(len(e.ids) for e in encs)
        ids, mask, types = (np.zeros((len(encs), L), dtype=np.int64) for _ in range(3))
        for r, e in enumerate(encs):
            n = len(e.ids)
            ids[r, :n], mask[r, :n], types[r, :n] = e.ids, e.attention_mask, e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        hidden = self.sess.run(None, {k: v for k, v in feeds.items() if k in self.inputs})[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def embed(self, texts):
        encs = self.tok.encode_batch(texts)
        lengths = [len(e.ids) for e in encs]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for group in length_groups(order, lengths):
            out[group] = self.run([encs[i] for i in group])
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="PATH.onnx (output: last_hidden_state)")
    ap.add_argument("--tokenizer", required=True, help="PATH/tokenizer.json")
    ap.add_argument("--file", default="/tmp/locomo_turns.txt", help="one text per line")
    ap.add_argument("--texts", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="intra-op threads")
    ap.add_argument("--no-spin", action="store_true", help="idle ORT threads sleep instead of spinning")
    ap.add_argument("--singles", type=int, default=200, help="single-text runs for latency")
    ap.add_argument("--reference-npy", help="[K, 384] vectors of the first K texts to compare with")
    ap.add_argument("--save-npy", help="write this run's [N, 384] vectors here")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()

    lines = [l.rstrip("\n") for l in open(a.file, encoding="utf-8")]
    lines = [l if l.strip() else " " for l in lines]
    texts = [lines[i % len(lines)] for i in range(a.texts)]
    emb = Embedder(a.model, a.tokenizer, a.threads, not a.no_spin)
    emb.embed(texts[: a.batch])  # warm-up: one batch

    cpu0, t0 = time.process_time(), time.perf_counter()
    vecs = np.concatenate([emb.embed(texts[i : i + a.batch]) for i in range(0, len(texts), a.batch)])
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0

    lat, cpu1 = [], time.process_time()
    for t in (texts[i % len(texts)] for i in range(a.singles)):
        s = time.perf_counter()
        emb.embed([t])
        lat.append((time.perf_counter() - s) * 1e3)
    single_cpu = (time.process_time() - cpu1) / a.singles * 1e3

    r = {
        "model": os.path.basename(a.model), "texts": len(texts), "batch": a.batch,
        "threads": a.threads, "spin": not a.no_spin, "mean_tokens": float(np.mean([len(e.ids) for e in emb.tok.encode_batch(texts)])),
        "texts_per_s": len(texts) / wall, "cpu_ms_per_text": cpu / len(texts) * 1e3,
        "single_p50_ms": float(np.percentile(lat, 50)), "single_p99_ms": float(np.percentile(lat, 99)),
        "single_cpu_ms": single_cpu, "first_norm": float(np.linalg.norm(vecs[0])),
        "load_1min": os.getloadavg()[0],
    }
    if a.reference_npy:
        ref = np.load(a.reference_npy).astype(np.float32)
        k = min(len(ref), len(vecs))
        ref = ref[:k] / np.linalg.norm(ref[:k], axis=1, keepdims=True)
        cos = (ref * vecs[:k]).sum(1)
        r.update(ref_n=k, cos_min=float(cos.min()), cos_mean=float(cos.mean()))
    if a.save_npy:
        np.save(a.save_npy, vecs)
    if a.json:
        print(json.dumps(r))
    else:
        for k, v in r.items():
            print(f"{k:16s} {v:.4f}" if isinstance(v, float) else f"{k:16s} {v}")


if __name__ == "__main__":
    main()
