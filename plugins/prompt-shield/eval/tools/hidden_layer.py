"""Would a model with a hidden layer over the detector's own features pay?

Measured on the **validation** split only (the test rows of the dump are not
read unless `--test` is given, which is for a model that cleared its bar).

The features are the detector's, as `examples/dump_features.rs` writes them:
the hashed character 3-5-grams and word 1-2-grams of the normalised text
(2^17 buckets, with their counts) and the nine hand features. The model is
fastText's with a hidden layer: an embedding bag (a `dim`-vector per bucket,
the text's vectors summed with its n-gram counts and divided by the number
of n-grams, `--pool mean`, or by its square root, `--pool sqrt`), the hand
features appended, a ReLU layer of `hidden` units and a logistic output.
Adam (lazy on the embedding rows a batch touches), batches of 256,
attacks and benign texts weighted to equal totals with benign errors
weighted 1.3 (as `examples/train` does), on the rows `examples/train` trains
on (every text of `data/*.jsonl`, its decoded payloads, the windows of long
benign texts). Early stopping on training sources held out by source family
(a source and its `-injected` copy together; the families whose FNV hash
is 0 mod 5): the epoch with the lowest class-balanced log loss there is
kept (their ROC-AUC is 0.99+ from the first epoch), at most `--epochs`,
stopping after three epochs without a better one. `--sizes 1x0` is the
same bag with one weight per bucket and no hidden layer (the detector's
model family under this recipe), the comparison that isolates the hidden
layer. Deterministic (seeded numpy generator; one thread gives the
same bits).

On validation: the model's score on the whole text, and `max(whole, best
window - 0.5 - ln(windows))` as `model.rs` combines windows (the windows are
`model.rs`'s: the n-grams starting in 256 normalised characters, stride
128). Then, out of fold exactly as `cascade_wordllama.py` and
`examples/calibrate.rs -- --fit` compare (ten times five folds by group,
the calibration refitted on four folds, L2 1.0, benign weighted 3), the
calibrated score alone and with the hidden model's whole-text and best-window
logits as two more inputs: recall at FPR .005-.05, ROC-AUC, and the
`balanced` point (threshold at FPR <= 0.015 on the four folds, applied to
the fifth): recall, FPR, documents-and-long-texts FPR, system prompts
flagged, indirect and jailbreak attacks caught (averaged over the ten
repetitions).

    cargo run --release -p prompt-shield --example dump_features -- /tmp/feats
    cargo run --release -p prompt-shield --example calibrate -- --dump /tmp/val_x.jsonl
    python3 eval/tools/hidden_layer.py /tmp/feats /tmp/val_x.jsonl [--sizes 16x16,1x0] [--pool mean|sqrt] [--lr 3e-3] [--seed 11]

Needs numpy.
"""

import argparse
import json
import os

import numpy as np

from scoring import FPRS, auc, fnv, folds, logistic, recall_at, threshold_at

B = 1 << 17
HAND = 9


class Dump:
    """The rows of `dump_features`: metadata, and each row's (bucket, count) pairs."""

    def __init__(self, d):
        self.meta = [json.loads(line) for line in open(os.path.join(d, "meta.jsonl"), encoding="utf-8")]
        pairs = np.fromfile(os.path.join(d, "grams.bin"), dtype="<u4").reshape(-1, 2)
        self.bucket, self.count = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.float32)
        self.offset = np.array([m["offset"] for m in self.meta], dtype=np.int64)
        self.n = np.array([m["n"] for m in self.meta], dtype=np.int64)
        self.grams = np.array([m["grams"] for m in self.meta], dtype=np.float32)
        self.hand = np.array([m["hand"] for m in self.meta], dtype=np.float32)
        self.label = np.array([m["label"] for m in self.meta], dtype=np.float32)

    def batch(self, rows, pool):
        """Flattened pairs of `rows`: buckets, values (count / pooling norm), each pair's row in the batch."""
        n = self.n[rows]
        idx = np.concatenate([np.arange(o, o + k) for o, k in zip(self.offset[rows], n)]) if len(rows) else np.zeros(0, np.int64)
        seg = np.repeat(np.arange(len(rows)), n)
        g = np.maximum(self.grams[rows], 1.0)
        norm = g if pool == "mean" else np.sqrt(g)
        return self.bucket[idx], self.count[idx] / norm[seg], seg


class Net:
    def __init__(self, dim, hidden, seed):
        r = np.random.default_rng(seed)
        self.E = r.uniform(-0.1, 0.1, (B, dim)).astype(np.float32)
        self.W1 = (r.standard_normal((dim + HAND, hidden)) * np.sqrt(2 / (dim + HAND))).astype(np.float32)
        self.b1 = np.zeros(hidden, np.float32)
        self.w2 = (r.standard_normal(hidden) * np.sqrt(1 / max(hidden, 1))).astype(np.float32)
        self.b2 = np.float32(-1.0)
        # hidden 0: no hidden layer, a logistic output over the bag and the hand features (the
        # detector's model family, trained the same way, for comparison).
        self.linear = hidden == 0
        if self.linear:
            self.w2 = np.r_[np.ones(dim), np.zeros(HAND)].astype(np.float32)
        self.dense = ["w2", "b2"] if self.linear else ["W1", "b1", "w2", "b2"]
        self.m = {k: np.zeros_like(np.asarray(getattr(self, k))) for k in self.dense + ["E"]}
        self.v = {k: np.zeros_like(np.asarray(getattr(self, k))) for k in self.dense + ["E"]}
        self.t = 0

    def forward(self, bucket, val, seg, hand):
        P = np.zeros((len(hand), self.E.shape[1]), np.float32)
        # Segment sums by reduceat (rows with no n-grams keep zeros).
        if len(seg):
            starts = np.r_[0, np.flatnonzero(np.diff(seg)) + 1]
            P[seg[starts]] = np.add.reduceat(self.E[bucket] * val[:, None], starts, axis=0)
        X = np.c_[P, hand]
        if self.linear:
            return X @ self.w2 + self.b2, (X, X, X)
        A = X @ self.W1 + self.b1
        H = np.maximum(A, 0)
        z = H @ self.w2 + self.b2
        return z, (X, A, H)

    def step(self, bucket, val, seg, hand, y, sw, lr, wd=1e-6):
        z, (X, A, H) = self.forward(bucket, val, seg, hand)
        p = 1 / (1 + np.exp(-np.clip(z, -30, 30)))
        gz = ((p - y) * sw / sw.sum()).astype(np.float32)
        g = {"w2": H.T @ gz, "b2": gz.sum()}
        if self.linear:
            gX = np.outer(gz, self.w2)
        else:
            gA = np.outer(gz, self.w2) * (A > 0)
            g["W1"] = X.T @ gA
            g["b1"] = gA.sum(axis=0)
            gX = gA @ self.W1.T
        gP = gX[:, : self.E.shape[1]]
        # Embedding rows touched by the batch: contributions summed per bucket.
        order = np.argsort(bucket, kind="stable")
        bs = bucket[order]
        starts = np.r_[0, np.flatnonzero(np.diff(bs)) + 1]
        rows = bs[starts]
        gE = np.add.reduceat(gP[seg[order]] * val[order, None], starts, axis=0)
        self.t += 1
        b1c, b2c = 1 - 0.9**self.t, 1 - 0.999**self.t
        for k in self.dense:
            gk = g[k] + (wd * getattr(self, k) if k == "W1" else 0)
            self.m[k] = 0.9 * self.m[k] + 0.1 * gk
            self.v[k] = 0.999 * self.v[k] + 0.001 * gk * gk
            setattr(self, k, (getattr(self, k) - lr * (self.m[k] / b1c) / (np.sqrt(self.v[k] / b2c) + 1e-8)).astype(np.float32))
        m, v = self.m["E"], self.v["E"]
        m[rows] = 0.9 * m[rows] + 0.1 * gE
        v[rows] = 0.999 * v[rows] + 0.001 * gE * gE
        self.E[rows] -= lr * (m[rows] / b1c) / (np.sqrt(v[rows] / b2c) + 1e-8)

    def score(self, dump, rows, pool, bs=512):
        out = np.zeros(len(rows), np.float32)
        for i in range(0, len(rows), bs):
            r = rows[i : i + bs]
            b, v, s = dump.batch(r, pool)
            out[i : i + bs] = self.forward(b, v, s, dump.hand[r])[0]
        return out

    def params(self):
        return self.E.size + (0 if self.linear else self.W1.size + self.b1.size) + self.w2.size + 1


def train(dump, dim, hidden, pool, epochs, lr, seed):
    meta = dump.meta
    family = lambda s: s[: -len("-injected")] if s.endswith("-injected") else s
    tr = np.array([i for i, m in enumerate(meta) if m["split"] == "train"])
    held = np.array([fnv(family(meta[i]["source"])) % 5 == 0 for i in tr])
    fit_rows, stop_rows = tr[~held], tr[held & np.array([meta[i]["role"] == "text" for i in tr])]
    y = dump.label[fit_rows]
    n, pos = len(y), y.sum()
    sw = np.where(y > 0.5, n / (2 * pos), 1.3 * n / (2 * (n - pos))).astype(np.float32)
    net = Net(dim, hidden, seed)
    rng = np.random.default_rng(seed)
    best = (-np.inf, 0, None)
    for ep in range(epochs):
        perm = rng.permutation(len(fit_rows))
        for i in range(0, len(perm), 256):
            k = perm[i : i + 256]
            r = fit_rows[k]
            b, v, s = dump.batch(r, pool)
            net.step(b, v, s, dump.hand[r], y[k], sw[k], lr)
        zs, ys = net.score(dump, stop_rows, pool), dump.label[stop_rows]
        ps = 1 / (1 + np.exp(-np.clip(zs, -30, 30)))
        # Class-balanced log loss: the held-out sources' AUC sits near 1 from the first epoch.
        loss = -0.5 * (np.log(ps[ys > 0.5] + 1e-7).mean() + np.log(1 - ps[ys < 0.5] + 1e-7).mean())
        a = -loss
        print(f"    epoch {ep + 1}: held-out training sources log loss {loss:.4f}, AUC {auc(zs, ys):.4f}", flush=True)
        if a > best[0]:
            best = (a, ep + 1, {k: np.copy(np.asarray(getattr(net, k))) for k in net.dense + ["E"]})
        elif ep + 1 - best[1] >= 3:
            break
    for k, v in best[2].items():
        setattr(net, k, v)
    stop_src = sorted({meta[i]["source"] for i in stop_rows})
    return net, best, stop_src, len(fit_rows), len(stop_rows)


def heldout_scores(dump, net, split, pool):
    """Whole-text logit, best-window logit (whole when no windows) and model.rs's combination, per text."""
    meta = dump.meta
    texts = [i for i, m in enumerate(meta) if m["split"] == split and m["role"] == "text"]
    wins = [i for i, m in enumerate(meta) if m["split"] == split and m["role"] == "window"]
    zt = net.score(dump, np.array(texts), pool)
    zw = net.score(dump, np.array(wins), pool) if wins else np.zeros(0)
    pos = {t: j for j, t in enumerate(texts)}
    best = zt.copy()
    nwin = np.zeros(len(texts))
    seen = np.zeros(len(texts), bool)
    for w, z in zip(wins, zw):
        j = pos[meta[w]["parent"]]
        best[j] = z if not seen[j] else max(best[j], z)
        seen[j] = True
        nwin[j] += 1
    comb = np.where(seen, np.maximum(zt, best - 0.5 - np.log(np.maximum(nwin, 1))), zt)
    return texts, zt, best, comb


def out_of_fold(X, y, groups, doclong, sysp, kinds):
    """The calibration refitted out of fold (10 x 5 folds by group) and its `balanced` point."""
    r = {"oof": np.zeros(len(FPRS)), "auc": 0.0, "tp": 0.0, "fp": 0.0, "fp_dl": 0.0, "fp_sys": 0.0, "ind": 0.0, "jb": 0.0}
    sw = np.where(y > 0.5, 1.0, 3.0)
    for rep in range(10):
        fold = folds(groups, rep)
        o = np.zeros(len(y))
        for k in range(5):
            m = fold != k
            s = X @ logistic(X[m], y[m], sw[m], 1.0)
            o[~m] = s[~m]
            flag = (s >= threshold_at(s[m], y[m], 0.015)) & ~m
            r["tp"] += (flag & (y > 0.5)).sum() / 10
            r["fp"] += (flag & (y < 0.5)).sum() / 10
            r["fp_dl"] += (flag & (y < 0.5) & doclong).sum() / 10
            r["fp_sys"] += (flag & (y < 0.5) & sysp).sum() / 10
            r["ind"] += (flag & (y > 0.5) & (kinds == "indirect")).sum() / 10
            r["jb"] += (flag & (y > 0.5) & (kinds == "jailbreak")).sum() / 10
        r["oof"] += np.array([recall_at(o, y, f) for f in FPRS]) / 10
        r["auc"] += auc(o, y) / 10
    nb, na = (y < 0.5).sum(), (y > 0.5).sum()
    return r, (r["tp"] / na, r["fp"] / nb, r["fp_dl"] / (doclong & (y < 0.5)).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("feats", help="the directory examples/dump_features.rs wrote")
    ap.add_argument("calib", help="examples/calibrate.rs --dump FILE (validation rows)")
    ap.add_argument("--sizes", default="16x16,16x64,32x32,32x64", help="embedding dim x hidden units, comma-separated (1x0: one weight per bucket, no hidden layer)")
    ap.add_argument("--pool", choices=["mean", "sqrt"], default="mean")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    dump = Dump(args.feats)
    val = [json.loads(line) for line in open(args.calib, encoding="utf-8")]
    y = np.array([1.0 if r["label"] else 0.0 for r in val])
    groups = [r["group"] for r in val]
    doclong = np.array([r["slice"] == "document" or len(r["text"]) >= 2000 for r in val])
    sysp = np.array([r["slice"] == "system_prompt" for r in val])
    kinds = np.array([r["kind"] for r in val])
    X0 = np.array([r["x"] for r in val])
    print(f"validation: {int(y.sum())} attacks, {int((y < 0.5).sum())} benign ({int(sysp.sum())} system prompts, {int((kinds == 'indirect').sum())} indirect, {int((kinds == 'jailbreak').sum())} jailbreak)")
    show = lambda name, s: print(f"  {name:<40}", " ".join(f"{recall_at(s, y, f):.3f}" for f in FPRS), f" AUC {auc(s, y):.4f}", flush=True)

    def line(name, X):
        r, b = out_of_fold(X, y, groups, doclong, sysp, kinds)
        print(f"  {name:<40}", " ".join(f"{v:.3f}" for v in r["oof"]), f" AUC {r['auc']:.4f} | balanced {b[0]:.3f} {b[1]:.4f} {b[2]:.4f} | sys FP {r['fp_sys']:.1f} ind {r['ind']:.1f} jb {r['jb']:.1f}", flush=True)

    print(f"recall at FPR {FPRS}, ROC-AUC | balanced point out of fold: recall, FPR, doc/long FPR | system prompts flagged, indirect / jailbreak caught")
    show("model's score (x[0])", X0[:, 0])
    line("calibrated alone (out of fold)", X0)
    for size in args.sizes.split(","):
        dim, hidden = (int(v) for v in size.split("x"))
        print(f"\nhidden-layer model dim {dim}, hidden {hidden}, pool {args.pool}", flush=True)
        net, best, stop_src, nfit, nstop = train(dump, dim, hidden, args.pool, args.epochs, args.lr, args.seed)
        print(f"  trained on {nfit} rows; early stopping on {nstop} texts of {', '.join(stop_src)}: epoch {best[1]}, log loss {-best[0]:.4f}; {net.params()} parameters")
        texts, zt, zb, zc = heldout_scores(dump, net, "validation", args.pool)
        lab = dump.label[np.array(texts)]
        assert len(texts) == len(val) and (lab == y).all() and all(dump.meta[t]["group"] == g for t, g in zip(texts, groups)), "dumps disagree"
        show("hidden model, whole text", zt)
        show("hidden model, whole or window (model.rs)", zc)
        for kind in ["direct", "indirect", "jailbreak", "obfuscated", "prompt_leak"]:
            m = (kinds == kind) | (y < 0.5)
            print(f"    {kind:<12} recall at FPR .02 {recall_at(zc[m], y[m], 0.02):.3f}")
        line("calibrated + hidden whole, window", np.c_[X0[:, :-1], zt / 10, zb / 10, X0[:, -1]])
        line("calibrated + hidden combined", np.c_[X0[:, :-1], zc / 10, X0[:, -1]])


if __name__ == "__main__":
    main()
