"""Benign system prompts of agent frameworks, as training texts (label 0).

Applications send their own system prompt, and often paste it into the user
turn: long, rule-heavy text that addresses the model ("You are…", "Never…",
"Always…", "Do not reveal…"). The held-out set's `system_prompt` slice
(aider, PyRIT, spikee, AgentDojo) showed the model had seen too few. These
come from the prompts that agent frameworks ship in their wheels, none of them
a held-out source (`../../eval/README.md`) nor a package of the non-user
rule's measurement set (`../eval/system_benign.jsonl`: llama-index-core,
crewai, autogen-agentchat), nor a package already read by `extra_data.py`.

Sources (PyPI wheels, `pip download --no-deps`, unzipped into SRC/x/NAME;
licence as stated in each wheel's metadata and licence file):
  smolagents 1.26.0 (Apache-2.0), camel-ai 0.2.90 (Apache-2.0), ag2 1.2.1
  (Apache-2.0), marvin 3.2.7 (Apache-2.0), swarms 16.0.3 (Apache-2.0),
  openai-agents 0.24.0 (MIT), instructor 1.17.0 (MIT), gpt-researcher 0.15.1
  (MIT), langroid 0.69.16 (MIT), pydantic-ai-slim 2.62.0 (MIT),
  langchain-community 0.4.2 (MIT, declared in its metadata; no licence file).

    mkdir -p $SRC/dl && cd $SRC/dl
    for s in smolagents==1.26.0 camel-ai==0.2.90 ag2==1.2.1 marvin==3.2.7 swarms==16.0.3 \
             openai-agents==0.24.0 instructor==1.17.0 gpt-researcher==0.15.1 langroid==0.69.16 \
             pydantic-ai-slim==2.62.0 langchain-community==0.4.2; do
      pip download --no-deps --python-version 3.12 --only-binary=:all: $s; done
    for w in *.whl; do n=$(basename $w | cut -d- -f1); mkdir -p ../x/$n; unzip -q -o $w -d ../x/$n; done
    python3 agent_prompts.py   # SRC=/tmp/sp8 by default; needs PyYAML

What is read: string literals and f-strings of the Python sources (f-string
slots kept as `{name}`), string values of YAML files, Markdown and Jinja
prompt files (`*prompt*.md`, `AGENTS.md`, `CLAUDE.md`, `instructions.md`,
`*.jinja`), of 200 characters or more that address the model. Dropped:
files about attacks or misalignment (`ATTACK_FILE`), texts quoting a known
attack (`ATTACK_LIKE`), code and docstrings (`NOT_PROMPT`), any text that
shares an 8-word shingle with a held-out text or with the measurement set,
and texts already in the training data. At most `PER_PACKAGE` texts of a
package (a seeded sample), so that no framework's style dominates. Long texts
are cut at a paragraph to at most 6,000 characters, as the held-out set's.

    python3 agent_prompts.py --out DIR [--system-only] [--per-package N] [--with-attacks]

writes `DIR/agent_prompts_benign.jsonl` (deterministic). `--system-only` keeps
the texts that open as a system prompt does ("You are…", "Act as…", a
`# Role` heading); `--with-attacks` adds, for every text, a copy with one
attack sentence of `seeds_attack.py` (override, extraction, persona or
exfiltration) at its start, end or between two paragraphs (label 1,
`authored-train`), so that the framing of a system prompt is seen on both
sides. Measured as training data and not adopted (`../../eval/README.md`):
written into `data/`, the trainer would read it.
"""

import argparse
import ast
import glob
import json
import os
import random
import re

from common import fstring_text, key

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
SRC = os.environ.get("AGENTSRC", "/tmp/sp8")
PER_PACKAGE = 60

PACKAGES = [
    ("smolagents", "smolagents", "1.26.0", "Apache-2.0"),
    ("camel_ai", "camel-ai", "0.2.90", "Apache-2.0"),
    ("ag2", "ag2", "1.2.1", "Apache-2.0"),
    ("marvin", "marvin", "3.2.7", "Apache-2.0"),
    ("swarms", "swarms", "16.0.3", "Apache-2.0"),
    ("openai_agents", "openai-agents", "0.24.0", "MIT"),
    ("instructor", "instructor", "1.17.0", "MIT"),
    ("gpt_researcher", "gpt-researcher", "0.15.1", "MIT"),
    ("langroid", "langroid", "0.69.16", "MIT"),
    ("pydantic_ai_slim", "pydantic-ai-slim", "2.62.0", "MIT"),
    ("langchain_community", "langchain-community", "0.4.2", "MIT"),
]

# Text that addresses the model, as a system prompt does.
PROMPT_LIKE = re.compile(
    r"\b(you are|you're|your (task|role|job|goal|objective|answer|response)|you will be|you must|you should|you have been|"
    r"act as|as an? (ai|assistant|agent)|the assistant|the user)\b",
    re.I,
)
# A whole prompt starts as one does, not in the middle of a sentence.
STARTS = re.compile(r"^[A-Z#<*\-{\[`]")
NOT_PROMPT = re.compile(r"(^|\n)\s*(def |import |from \S+ import |class )|:param|Args:\n|Returns:\n|Example usage|>>> ")
ATTACK_LIKE = re.compile(
    r"ignore (all )?(the |your |any )?(previous|prior|above)|disregard (all|the|any|your) (previous|prior|above)|"
    r"\bDAN\b|jailbr|developer mode|prompt injection|do anything now",
    re.I,
)
ATTACK_FILE = re.compile(r"misalign|red_?team|jailbreak|attack|adversar|injection|exploit", re.I)
SYSTEM_OPENING = re.compile(
    r"^(#+ *(role|system|instructions?|task)\b.*\n+)?\s*(you are|you're|your (task|role|job|goal)|act as|as an? )", re.I
)
MD_NAMES = re.compile(r"(prompt[^/]*\.md|AGENTS\.md|CLAUDE\.md|instructions\.md|\.jinja2?|\.j2)$")


def shingles(t, n=8):
    w = re.findall(r"\w+", t.lower())
    return {" ".join(w[i : i + n]) for i in range(max(0, len(w) - n + 1))}


def jsonl_texts(pattern):
    out = []
    for f in sorted(glob.glob(pattern)):
        for line in open(f, encoding="utf-8"):
            if line.strip():
                out.append(json.loads(line)["text"])
    return out


def cut(t, limit=6000):
    if len(t) <= limit:
        return t
    head = t[:limit]
    at = head.rfind("\n\n")
    return head[:at] if at > limit // 2 else head


def python_strings(path):
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            docstrings.update(id(v) for v in node.values)
            yield node.lineno, fstring_text(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def yaml_strings(path):
    import yaml

    try:
        doc = yaml.safe_load(open(path, encoding="utf-8"))
    except Exception:
        return
    stack = [("", doc)]
    while stack:
        k, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{k}.{a}", b) for a, b in sorted(v.items(), key=lambda x: str(x[0])))
        elif isinstance(v, list):
            stack.extend((f"{k}[{i}]", b) for i, b in enumerate(v))
        elif isinstance(v, str):
            yield k, v


def candidates(folder):
    root = os.path.join(SRC, "x", folder)
    for f in sorted(glob.glob(os.path.join(root, "**", "*"), recursive=True)):
        rel = os.path.relpath(f, root)
        if ".dist-info" in rel or not os.path.isfile(f) or ATTACK_FILE.search(rel) or "/tests/" in f"/{rel}":
            continue
        if f.endswith(".py"):
            for line, s in python_strings(f):
                yield f"{rel}:{line}", s
        elif f.endswith((".yaml", ".yml")):
            for k, s in yaml_strings(f):
                yield f"{rel}:{k}", s
        elif MD_NAMES.search(rel):
            try:
                yield rel, open(f, encoding="utf-8").read()
            except UnicodeDecodeError:
                continue


def with_attacks(rows):
    """Each benign text again with one attack sentence in it (label 1)."""
    import seeds_attack as S

    families = [S.DIRECT_OVERRIDE, S.EXTRACTION, S.PERSONA, S.EXFIL]
    rng = random.Random(9)
    out = []
    for r in rows:
        seeds = rng.choice(families)
        attack = seeds[rng.randrange(len(seeds))]
        t, paras = r["text"], r["text"].split("\n\n")
        where = rng.choice(["end", "end", "start", "middle"])
        if where == "end":
            t = t + "\n\n" + attack
        elif where == "start":
            t = attack + "\n\n" + t
        else:
            k = rng.randrange(1, len(paras)) if len(paras) > 1 else 1
            t = "\n\n".join(paras[:k] + [attack] + paras[k:])
        out.append({"text": t, "label": 1, "source": "authored-train", "group": r["group"]})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder to write agent_prompts_benign.jsonl into")
    ap.add_argument("--per-package", type=int, default=PER_PACKAGE)
    ap.add_argument("--system-only", action="store_true")
    ap.add_argument("--with-attacks", action="store_true")
    args = ap.parse_args()
    held = jsonl_texts(os.path.join(DATA, "..", "eval", "heldout", "*.jsonl"))
    measure = jsonl_texts(os.path.join(DATA, "eval", "system_benign.jsonl"))
    banned_keys = {key(t) for t in held + measure}
    banned_sh = set().union(*(shingles(t) for t in held + measure))
    own = os.path.join(os.path.abspath(args.out), "agent_prompts_benign.jsonl")
    train_keys = {key(t) for f in sorted(glob.glob(os.path.join(DATA, "*.jsonl"))) if f != own for t in jsonl_texts(f)}
    rng = random.Random(8)
    rows, dropped = [], {"overlap": 0, "attack": 0}
    for folder, name, version, licence in PACKAGES:
        seen, kept = set(), []
        for where, s in candidates(folder):
            t = re.sub(r"[ \t]+\n", "\n", s).strip()
            if len(t) < 200 or not STARTS.match(t) or not PROMPT_LIKE.search(t) or NOT_PROMPT.search(t):
                continue
            if ATTACK_LIKE.search(t):
                dropped["attack"] += 1
                continue
            t = cut(t)
            k = key(t)
            if k in seen or k in train_keys:
                continue
            seen.add(k)
            if k in banned_keys or shingles(t) & banned_sh:
                dropped["overlap"] += 1
                continue
            kept.append((where, t))
        if len(kept) > args.per_package:
            kept = [kept[i] for i in sorted(rng.sample(range(len(kept)), args.per_package))]
        for where, t in kept:
            rows.append({"text": t, "label": 0, "source": f"{name} {version} ({licence})", "group": f"agent-prompt:{name}:{where}"})
    if args.system_only:
        rows = [r for r in rows if SYSTEM_OPENING.match(r["text"])]
    if args.with_attacks:
        rows = rows + with_attacks(rows)
    with open(own, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    by = {}
    for r in rows:
        by[r["source"]] = by.get(r["source"], 0) + 1
    for s, n in sorted(by.items()):
        print(f"{n:5}  {s}")
    print(f"{len(rows)} texts; dropped {dropped}")


if __name__ == "__main__":
    main()
