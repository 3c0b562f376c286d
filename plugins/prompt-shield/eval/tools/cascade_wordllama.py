"""Would WordLlama's static embeddings pay as a second opinion on the uncertain band?

Measured on the **validation** split only (the test split is not read). The
issue's optional cascade: a larger model scores only the texts whose
calibrated score (`src/calibrate.rs`) is near the `balanced` threshold.

The larger model: PyPI `wordllama` 0.4.0.post1 (MIT, `LICENSE` in the wheel),
whose wheel holds `wordllama/weights/l2_supercat_256.safetensors` (a 32,000 x
256 float16 token-embedding table trained down from the concatenated token
embeddings of Llama-2-family models, its `l2_supercat` config) and
`wordllama/tokenizers/l2_supercat_tokenizer_config.json` (the Llama-2 BPE,
32,000 tokens, byte fallback). A text is embedded as the package's
`WordLlamaInference.embed` does (tokenised without special tokens, each
token's row looked up, the rows averaged), with two choices of ours: the
first 1,024 tokens only (the package's training-time embedding class
truncates there, its `l2_supercat` training config at 256; 6,000 characters
of English are about 1,500 tokens) and the average
normalised to unit length (the package's `norm=True`). Besides the whole
text's embedding, windows of 128 tokens at stride 64 over those 1,024 tokens
are embedded the same way, and the head's largest window logit is kept (a
buried paragraph barely moves a 1,024-token average).

The head: an L2-regularised logistic regression (Newton's method) over the
256 standardised dimensions, trained on every text of `data/*.jsonl` (the
detector's training files), attacks and benign texts weighted to equal
totals; its L2 is chosen by five-fold cross-validation **on the training
data** (folds by `group`), by out-of-fold ROC-AUC.

The cascade, out of fold on validation exactly as `examples/calibrate.rs --
--fit` and `second_scorer_oof.py` compare (ten times five folds by `group`;
each fit sees four folds and scores the fifth): the calibration is refitted
on the four folds (L2 1.0, benign weighted 3), its `balanced` threshold is
the lowest with at most 1.5 % of the four folds' benign texts at or above
it, and the band is the calibrated logits between the four folds' benign
quantiles at FPR `lo` and `hi` (e.g. 10 % and 0.3 %). Inside the band a
2-input logistic (calibrated logit, head logit; plus the window logit with
`+win`) fitted on the four folds' band texts replaces the score; below the
band a text is allowed and above it flagged whatever the head says. The
pooled out-of-fold scores give recall at FPR .015 / .02; the `balanced`
point is chosen on the four folds (FPR <= 0.015) and applied to the fifth,
and its recall, FPR and documents-and-long-texts FPR are summed over the
folds. "Band" is the share of validation texts (all, benign) whose
calibrated score falls in the band, i.e. that would reach the second model.

The last rows refit the head on validation texts instead of the training
files: on the four folds of each fit, then held out by group and held out by
source (the source is the `group`'s first path element), to tell what the
embeddings learn from the kits' payloads and templates, which recur across
groups, from what carries to a source the head never saw.

`--pool`: `mean` (the default, described above), `mean-raw` (the package's
default `embed`, no normalisation), `mean-max` (also each dimension's maximum
over the tokens, divided by 10).

    cargo run --release -p prompt-shield --example calibrate -- --dump /tmp/val_x.jsonl
    pip download --no-deps wordllama==0.4.0.post1 && unzip -q wordllama-0.4.0.post1-*.whl -d /tmp/wl
    python3 eval/tools/cascade_wordllama.py /tmp/val_x.jsonl --wheel /tmp/wl

Needs numpy, safetensors and tokenizers (PyPI); no PyTorch. Deterministic.
"""

import argparse
import glob
import hashlib
import json
import os

import numpy as np
from safetensors import safe_open
from tokenizers import Tokenizer

from scoring import FPRS, auc, fnv, folds, logistic, recall_at, threshold_at

CRATE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEIGHTS = "wordllama/weights/l2_supercat_256.safetensors"
TOKENIZER = "wordllama/tokenizers/l2_supercat_tokenizer_config.json"
MAX_TOKENS = 1024
WIN, STRIDE = 128, 64
BANDS = [(0.05, 0.005), (0.10, 0.003), (0.20, 0.002), (0.40, 0.001), (1.0, 0.0)]


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


class Embedder:
    def __init__(self, wheel, pool):
        self.pool = pool
        with safe_open(os.path.join(wheel, WEIGHTS), framework="np") as f:
            self.table = f.get_tensor("embedding.weight").astype(np.float32)
        self.tok = Tokenizer.from_file(os.path.join(wheel, TOKENIZER))
        self.tok.no_truncation()
        self.tok.no_padding()

    def embed(self, texts):
        """Unit-length mean of the first MAX_TOKENS rows, and each window's unit-length mean."""
        whole, windows, ntok = [], [], []
        for i in range(0, len(texts), 256):
            for enc in self.tok.encode_batch(texts[i : i + 256], add_special_tokens=False):
                ids = np.clip(np.array(enc.ids[:MAX_TOKENS], dtype=np.int64), 0, len(self.table) - 1)
                ntok.append(len(enc.ids))
                rows = self.table[ids] if len(ids) else np.zeros((1, self.table.shape[1]), np.float32)
                whole.append(self.pooled(rows))
                starts = range(0, max(len(rows) - WIN, 0) + 1, STRIDE)
                windows.append(np.array([self.pooled(rows[s : s + WIN]) for s in starts]))
        return np.array(whole), windows, np.array(ntok)


    def pooled(self, rows):
        if self.pool == "mean-raw":
            return rows.mean(axis=0)
        if self.pool == "mean-max":
            return np.r_[unit(rows.mean(axis=0)), rows.max(axis=0) / 10]
        return unit(rows.mean(axis=0))


def unit(v):
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def train_head(Z, y, groups):
    """Standardise, choose L2 by 5-fold CV on the training data (folds by group), refit on all."""
    mu, sd = Z.mean(axis=0), Z.std(axis=0) + 1e-6
    X = np.c_[(Z - mu) / sd, np.ones(len(Z))]
    n, pos = len(y), y.sum()
    sw = np.where(y > 0.5, n / (2 * pos), n / (2 * (n - pos)))
    fold = np.array([fnv(f"head/{g}") % 5 for g in groups])
    best = None
    print("head: L2 by 5-fold CV on the training data (out-of-fold ROC-AUC; recall at FPR .01 / .02 / .05)")
    for l2 in [0.1, 1.0, 10.0, 100.0, 1000.0]:
        o = np.zeros(n)
        for k in range(5):
            m = fold != k
            o[~m] = X[~m] @ logistic(X[m], y[m], sw[m], l2, iters=30)
        a = auc(o, y)
        print(f"  L2 {l2:<7} AUC {a:.4f}  " + " / ".join(f"{recall_at(o, y, f):.3f}" for f in (0.01, 0.02, 0.05)))
        if best is None or a > best[0]:
            best = (a, l2)
    w = logistic(X, y, sw, best[1], iters=30)
    print(f"  chosen L2 {best[1]}")
    return lambda Zv: np.c_[(Zv - mu) / sd, np.ones(len(Zv))] @ w


def cascade(X0, h, y, groups, doclong, band, extra=None, Zv=None):
    """Out-of-fold figures of the band cascade (see the docstring); band=None is the calibration alone.

    With `Zv` (the validation embeddings) the head itself is refitted on the four folds each time
    instead of on the training files: what the embeddings could add if the head were fitted on
    texts like the validation split's (the combiner then sees the head's in-sample logits, which
    if anything overweights the head)."""
    r = {"oof": np.zeros(len(FPRS)), "auc": 0.0, "tp": 0, "fp": 0, "fp_dl": 0, "in_band": 0, "in_band_benign": 0}
    nb, na, ndl = (y < 0.5).sum(), (y > 0.5).sum(), (doclong & (y < 0.5)).sum()
    sw_all = np.where(y > 0.5, 1.0, 3.0)
    for rep in range(10):
        fold = folds(groups, rep)
        o = np.zeros(len(y))
        for k in range(5):
            m = fold != k
            c = X0 @ logistic(X0[m], y[m], sw_all[m], 1.0, iters=50)
            if Zv is not None:
                mu, sd = Zv[m].mean(axis=0), Zv[m].std(axis=0) + 1e-6
                Xh = np.c_[(Zv - mu) / sd, np.ones(len(y))]
                pos = y[m].sum()
                swh = np.where(y[m] > 0.5, m.sum() / (2 * pos), m.sum() / (2 * (m.sum() - pos)))
                h = Xh @ logistic(Xh[m], y[m], swh, 100.0, iters=30)
            s = c.copy()
            if band is not None:
                lo, hi = band
                t_lo = threshold_at(c[m], y[m], lo) if lo < 1.0 else -np.inf
                t_hi = threshold_at(c[m], y[m], hi) if hi > 0.0 else np.inf
                inb = (c >= t_lo) & (c < t_hi)
                cols = [c, h] + ([extra] if extra is not None else [])
                Xc = np.c_[tuple(cols) + (np.ones(len(y)),)]
                mb = m & inb
                wc = logistic(Xc[mb], y[mb], sw_all[mb], 1.0, iters=30)
                comb = np.clip(Xc @ wc, -100, 100)
                s = np.where(c < t_lo, c - 1e4, np.where(c >= t_hi, c + 1e4, comb))
                r["in_band"] += inb[~m].sum() / 10
                r["in_band_benign"] += (inb[~m] & (y[~m] < 0.5)).sum() / 10
            o[~m] = s[~m]
            t = threshold_at(s[m], y[m], 0.015)
            flag = s[~m] >= t
            r["tp"] += (flag & (y[~m] > 0.5)).sum() / 10
            r["fp"] += (flag & (y[~m] < 0.5)).sum() / 10
            r["fp_dl"] += (flag & (y[~m] < 0.5) & doclong[~m]).sum() / 10
        r["oof"] += np.array([recall_at(o, y, f) for f in FPRS]) / 10
        r["auc"] += auc(o, y) / 10
    return {
        "oof": r["oof"],
        "auc": r["auc"],
        "balanced": (r["tp"] / na, r["fp"] / nb, r["fp_dl"] / ndl),
        "band": (r["in_band"] / len(y), r["in_band_benign"] / nb),
    }


def held_out_head(Zv, y, fold):
    """Each validation text's head logit from a head fitted on the validation texts of the other folds."""
    h = np.zeros(len(y))
    for k in sorted(set(fold)):
        m = fold != k
        mu, sd = Zv[m].mean(axis=0), Zv[m].std(axis=0) + 1e-6
        Xh = np.c_[(Zv - mu) / sd, np.ones(len(y))]
        pos = y[m].sum()
        swh = np.where(y[m] > 0.5, m.sum() / (2 * pos), m.sum() / (2 * (m.sum() - pos)))
        h[~m] = (Xh @ logistic(Xh[m], y[m], swh, 100.0, iters=30))[~m]
    return h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump", help="examples/calibrate.rs --dump FILE (validation rows)")
    ap.add_argument("--wheel", default="/tmp/wl", help="the unpacked wordllama 0.4.0.post1 wheel")
    ap.add_argument("--pool", choices=["mean", "mean-raw", "mean-max"], default="mean",
                    help="mean: unit-length average (default); mean-raw: the package's default embed (no norm); mean-max: also each dimension's max over the tokens")
    args = ap.parse_args()
    print("weights", WEIGHTS, sha256(os.path.join(args.wheel, WEIGHTS)))
    print("tokenizer", TOKENIZER, sha256(os.path.join(args.wheel, TOKENIZER)))
    emb = Embedder(args.wheel, args.pool)
    print("pooling", args.pool)

    rows = []
    for f in sorted(glob.glob(os.path.join(CRATE, "data", "*.jsonl"))):
        for line in open(f, encoding="utf-8"):
            if line.strip():
                v = json.loads(line)
                rows.append((v["text"], float(v["label"]), v["group"]))
    Zt, _, nt = emb.embed([t for t, _, _ in rows])
    yt = np.array([l for _, l, _ in rows])
    print(f"training texts: {len(rows)} ({int(yt.sum())} attacks), tokens per text median {int(np.median(nt))}, over {MAX_TOKENS}: {(nt > MAX_TOKENS).mean():.3f}")
    head = train_head(Zt, yt, [g for _, _, g in rows])

    val = [json.loads(line) for line in open(args.dump, encoding="utf-8")]
    y = np.array([1.0 if r["label"] else 0.0 for r in val])
    groups = [r["group"] for r in val]
    doclong = np.array([r["slice"] == "document" or len(r["text"]) >= 2000 for r in val])
    X0 = np.array([r["x"] for r in val])
    Zv, Wv, nv = emb.embed([r["text"] for r in val])
    h = head(Zv)
    hw = np.array([head(w).max() for w in Wv])
    print(f"\nvalidation: {int(y.sum())} attacks, {int((y < 0.5).sum())} benign; tokens per text median {int(np.median(nv))}, over {MAX_TOKENS}: {(nv > MAX_TOKENS).mean():.3f}")
    print(f"recall at FPR {FPRS}, ROC-AUC")
    show = lambda name, r, a: print(f"  {name:<44}", " ".join(f"{v:.3f}" for v in r), f" AUC {a:.4f}")
    show("model's score (x[0])", [recall_at(X0[:, 0], y, f) for f in FPRS], auc(X0[:, 0], y))
    show("head alone (whole text)", [recall_at(h, y, f) for f in FPRS], auc(h, y))
    show("head alone (best 128-token window)", [recall_at(hw, y, f) for f in FPRS], auc(hw, y))
    for kind in ["direct", "indirect", "jailbreak", "obfuscated", "prompt_leak"]:
        m = np.array([r["kind"] == kind for r in val]) | (y < 0.5)
        print(f"    head alone, {kind:<12} recall at FPR .02 {recall_at(h[m], y[m], 0.02):.3f}")

    print("\nout of fold (10 x 5 folds by group): recall at FPR", FPRS, "| balanced point (FPR <= 0.015 on the four folds): recall, FPR, doc/long FPR | band share: all, benign")

    def line(name, r):
        b, s = r["balanced"], r["band"]
        print(f"  {name:<44}", " ".join(f"{v:.3f}" for v in r["oof"]), f" AUC {r['auc']:.4f} | {b[0]:.3f} {b[1]:.4f} {b[2]:.4f} | {s[0]:.3f} {s[1]:.3f}")

    line("calibrated alone", cascade(X0, h, y, groups, doclong, None))
    line("calibrated + head logit as an 11th input", cascade(np.c_[X0[:, :-1], h / 10, X0[:, -1]], h, y, groups, doclong, None))
    for lo, hi in BANDS:
        line(f"cascade, band FPR {lo} .. {hi}", cascade(X0, h, y, groups, doclong, (lo, hi)))
        line(f"cascade +win, band FPR {lo} .. {hi}", cascade(X0, h, y, groups, doclong, (lo, hi), extra=hw))
    print("  head refitted on the four folds' validation texts (not on the training files):")
    for lo, hi in BANDS:
        line(f"cascade, band FPR {lo} .. {hi}", cascade(X0, h, y, groups, doclong, (lo, hi), Zv=Zv))
    # Whether that gain is the kits' recurring payloads and templates (which recur across groups)
    # or carries to a source the head never saw: head logits from five folds by group, and from
    # leave-one-source-out folds, each text scored by a head that did not see its fold.
    sources = [r["group"].split("/")[0] for r in val]
    h_grp = held_out_head(Zv, y, np.array([fnv(f"head/{g}") % 5 for g in groups]))
    h_src = held_out_head(Zv, y, np.array([fnv(s) % 997 for s in sources]))
    print(f"  validation-fitted head alone, held out by group:  AUC {auc(h_grp, y):.4f}, recall at FPR .01 / .02 / .05 " + " / ".join(f"{recall_at(h_grp, y, f):.3f}" for f in (0.01, 0.02, 0.05)))
    print(f"  validation-fitted head alone, held out by source: AUC {auc(h_src, y):.4f}, recall at FPR .01 / .02 / .05 " + " / ".join(f"{recall_at(h_src, y, f):.3f}" for f in (0.01, 0.02, 0.05)))
    for lo, hi in BANDS[:3]:
        line(f"by group: band FPR {lo} .. {hi}", cascade(X0, h_grp, y, groups, doclong, (lo, hi)))
        line(f"by source: band FPR {lo} .. {hi}", cascade(X0, h_src, y, groups, doclong, (lo, hi)))


if __name__ == "__main__":
    main()
