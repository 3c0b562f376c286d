"""What the held-out measurement scripts share: the fold hash, the operating-point figures and the
weighted logistic fit that refits a calibration out of fold (`second_scorer_oof.py`,
`cascade_wordllama.py`, `hidden_layer.py`). numpy only."""

import numpy as np

# The false-positive rates every script reports recall at.
FPRS = [0.005, 0.01, 0.015, 0.02, 0.03, 0.05]


def fnv(s):
    """64-bit FNV-1a of `s`: the stable hash that assigns groups to folds."""
    h = 0xCBF29CE484222325
    for c in s.encode():
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def folds(groups, rep, k=5):
    """The fold of each row in repetition `rep`: whole groups stay in one fold."""
    return np.array([fnv(f"{rep}/{g}") % k for g in groups])


def threshold_at(s, y, fpr):
    """The lowest score that flags at most `fpr` of the benign rows (label 0)."""
    b = np.sort(s[y < 0.5])[::-1]
    return b[int(np.floor(fpr * len(b)))] + 1e-9


def recall_at(s, y, fpr):
    """Recall of the attacks (label 1) at the threshold of `threshold_at`."""
    return (s[y > 0.5] >= threshold_at(s, y, fpr)).mean()


def auc(s, y):
    """ROC-AUC, ties counted half."""
    a, b = np.sort(s[y > 0.5]), np.sort(s[y < 0.5])
    lo, hi = np.searchsorted(b, a, "left"), np.searchsorted(b, a, "right")
    return (lo + 0.5 * (hi - lo)).sum() / (len(a) * len(b))


def logistic(X, y, sw, l2, iters=50):
    """Weights of a logistic regression by Newton steps: row weights `sw`, L2 `l2` on every column
    but the last (the intercept)."""
    w = np.zeros(X.shape[1])
    pen = np.full(X.shape[1], l2)
    pen[-1] = 1e-6
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(X @ w, -50, 50)))
        g = X.T @ ((p - y) * sw) + pen * w
        H = (X * (p * (1 - p) * sw)[:, None]).T @ X + np.diag(pen)
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w
