"""Would a second, word-level scorer pay as an input of the user-text calibration?

Measured on the **validation** split only. A hashed word model (word unigrams
and bigrams of the NFKC-lowercased text, 2^16 buckets, counts divided by
n^0.75, L2-regularised logistic regression with AdaGrad, the second half of
ten epochs averaged) is trained on the training files `data/*.jsonl`; its
logit is then added as an eleventh input of the calibration (`src/calibrate.rs`)
and the out-of-fold comparison of `examples/calibrate.rs -- --fit` is repeated
(ten times five folds by group; L2 1.0, benign texts weighted 3). This script
reproduces that comparison's "calibrated" row exactly, so the two rows differ
only by the added input.

    cargo run --release -p prompt-shield --example calibrate -- --dump /tmp/val_x.jsonl
    python3 eval/tools/second_scorer_oof.py /tmp/val_x.jsonl [--target all|system] [--extra FILE.jsonl]

`--target all` trains the word model on every training text (attack against
benign); `--target system` only on attacks against benign system prompts and
prompt templates (the prompt-template sources of `extra_benign.jsonl`,
gpt-engineer's, the templated ones, and `--extra` files such as the output of
`data/tools/agent_prompts.py`), as a "looks like a system prompt" signal.
Needs numpy.
"""

import argparse
import glob
import hashlib
import json
import os
import re
import unicodedata

import numpy as np

from scoring import FPRS, auc, folds, logistic, recall_at

CRATE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = 1 << 16
SYSTEM_SOURCES = {"deepeval", "langchain", "trulens_feedback", "ragas", "dspy", "haystack_ai", "semantic_kernel", "gpt-engineer", "templated-sysprompt"}
_cache = {}


def feats(t):
    w = re.findall(r"\w+", unicodedata.normalize("NFKC", t).lower())
    grams = w + [a + " " + b for a, b in zip(w, w[1:])]
    idx = {}
    for g in grams:
        k = _cache.get(g)
        if k is None:
            k = _cache[g] = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little") % B
        idx[k] = idx.get(k, 0) + 1
    keys = np.fromiter(idx.keys(), dtype=np.int64, count=len(idx))
    vals = np.fromiter(idx.values(), dtype=float, count=len(idx))
    return keys, vals / max(len(grams), 1) ** 0.75


def train(rows, wneg, bias):
    X = [feats(t) for t, _ in rows]
    y = np.array([l for _, l in rows])
    n, pos = len(y), y.sum()
    wts = np.where(y > 0.5, n / (2 * pos), wneg * n / (2 * (n - pos)))
    w, G, avg = np.zeros(B), np.full(B, 1e-8), np.zeros(B)
    rng = np.random.default_rng(5)
    epochs = 10
    for ep in range(epochs):
        for i in rng.permutation(n):
            k, v = X[i]
            p = 1 / (1 + np.exp(-(bias + (w[k] * v).sum())))
            g = (p - y[i]) * wts[i] * v + 1e-3 * w[k]
            G[k] += g * g
            w[k] -= 0.1 * g / np.sqrt(G[k])
        if ep >= epochs // 2:
            avg += w / (epochs - epochs // 2)
    return lambda t: bias + (avg[feats(t)[0]] * feats(t)[1]).sum()


def out_of_fold(X, y, groups):
    r = np.zeros(7)
    for rep in range(10):
        fold = folds(groups, rep)
        o = np.zeros(len(y))
        for k in range(5):
            m = fold != k
            o[~m] = X[~m] @ logistic(X[m], y[m], np.where(y[m] > 0.5, 1.0, 3.0), 1.0)
        r[:6] += np.array([recall_at(o, y, f) for f in FPRS]) / 10
        r[6] += auc(o, y) / 10
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--target", choices=["all", "system"], default="all")
    ap.add_argument("--extra", action="append", default=[])
    args = ap.parse_args()
    rows = []
    for f in sorted(glob.glob(os.path.join(CRATE, "data", "*.jsonl"))) + args.extra:
        for line in open(f, encoding="utf-8"):
            if line.strip():
                v = json.loads(line)
                if args.target == "all" or v["label"] == 1 or v["source"] in SYSTEM_SOURCES or f in args.extra:
                    rows.append((v["text"], float(v["label"])))
    score = train(rows, 1.3, -2.0) if args.target == "all" else train(rows, 1.0, 0.0)
    val = [json.loads(line) for line in open(args.dump, encoding="utf-8")]
    X0 = np.array([r["x"] for r in val])
    y = np.array([1.0 if r["label"] else 0.0 for r in val])
    groups = [r["group"] for r in val]
    word = np.array([score(r["text"]) for r in val])
    show = lambda name, r: print(f"  {name:<26}", " ".join(f"{v:.3f}" for v in r[:6]), f" AUC {r[6]:.4f}")
    print(f"validation: recall at FPR {FPRS}, ROC-AUC (word model: --target {args.target}, {len(rows)} training texts)")
    show("model's score", np.r_[[recall_at(X0[:, 0], y, f) for f in FPRS], auc(X0[:, 0], y)])
    show("word model alone", np.r_[[recall_at(word, y, f) for f in FPRS], auc(word, y)])
    show("calibrated (out of fold)", out_of_fold(X0, y, groups))
    show("calibrated + word logit", out_of_fold(np.c_[X0[:, :-1], word / 10, X0[:, -1]], y, groups))


if __name__ == "__main__":
    main()
