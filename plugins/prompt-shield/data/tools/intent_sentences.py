#!/usr/bin/env python3
"""Benign short requests and questions in many languages (issue 31, the short
multilingual false alarms): writes `intents_benign.jsonl` into the folder
given by `--out` (`data/` puts it in the training set).

Measured and **not** in the training set: it removed the short multilingual
false alarms on the validation split but not the ones that set the threshold,
and cost jailbreak recall (`eval/README.md`, "Ordinary-request injections in
records, and short requests in many languages"), so its output is not in `data/`.

Voice assistants ship the sentences their users say, in many languages, as
templates: "(what's|what is) [the] weather [like]". This expands them (one
random choice at each alternative and optional part, seeded) and keeps
sentences without an open slot (a device or area name, free text):

- PyPI `home-assistant-intents` 2026.10.27 (Apache-2.0, `LICENSE.md` in the
  wheel): the sentence templates of Home Assistant's voice intents, 59
  languages (`home_assistant_intents/data/*.json`; slots with a value list or
  a number range are filled from it);
- PyPI `ovos-skill-weather` 1.0.6, `ovos-skill-date-time` 1.1.5,
  `ovos-skill-wikipedia` 0.8.13, `ovos-skill-ddg` 0.3.7,
  `ovos-skill-personal` 0.1.19, `ovos-skill-wolfie` 0.5.8 (OpenVoiceOS
  skills, Apache-2.0, `LICENSE` in each wheel): their `locale/*/**/*.intent`
  example utterances (about 20 languages; a place or topic slot is filled with a
  city or a well-known name).

None is a held-out source (`eval/README.md`); any text that occurs in
`eval/heldout` is dropped.

    mkdir -p /tmp/it/dl && cd /tmp/it/dl
    pip download --no-deps home-assistant-intents==2026.10.27 ovos-skill-weather==1.0.6 \\
        ovos-skill-date-time==1.1.5 ovos-skill-wikipedia==0.8.13 ovos-skill-ddg==0.3.7 \\
        ovos-skill-personal==0.1.19 ovos-skill-wolfie==0.5.8
    for w in *.whl; do n=$(basename $w | cut -d- -f1); mkdir -p ../x/$n; unzip -q -o $w -d ../x/$n; done
    python3 plugins/prompt-shield/data/tools/intent_sentences.py --out DIR [--no-slots]   # SRC=/tmp/it by default

(`--no-slots` keeps only the OVOS sentences without a slot, as first measured.)
"""
import glob
import json
import os
import random
import re
import sys

from common import key

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
SRC = os.environ.get("SRC", "/tmp/it")
rng = random.Random(4417)
HA_PER_LANGUAGE = 9
OVOS_PER_LANGUAGE = 24


# Names for the place and topic slots of the OVOS sentences (the same in most languages).
CITIES = ["Lisboa", "Berlin", "Nairobi", "Montréal", "Kraków", "Sevilla", "Osaka", "Reykjavík", "Tallinn", "Porto Alegre", "Bilbao", "Göteborg"]
TOPICS = ["Marie Curie", "Albert Einstein", "Frida Kahlo", "Nelson Mandela", "Ada Lovelace", "Wolfgang Amadeus Mozart", "Kilimanjaro",
          "Amazonas", "Leonardo da Vinci", "Gabriel García Márquez", "Alan Turing", "Mahatma Gandhi", "Fibonacci", "Copernicus"]


class Open(Exception):
    """A slot without a list of values: the sentence is not kept."""


def expand(t, rules, lists, depth=0):
    """One random sentence of template `t`."""
    if depth > 12:
        raise Open()
    alts, level, start = [], 0, 0
    for k, ch in enumerate(t):
        level += ch in "(["
        level -= ch in ")]"
        if ch == "|" and level == 0:
            alts.append(t[start:k])
            start = k + 1
    if alts:
        t = rng.choice(alts + [t[start:]])
    out, i = [], 0
    while i < len(t):
        c = t[i]
        if c in "([":
            j, level = i, 0
            while True:
                level += t[j] in "(["
                level -= t[j] in ")]"
                if level == 0:
                    break
                j += 1
            inner = t[i + 1:j]
            alts, level, start = [], 0, 0
            for k, ch in enumerate(inner):
                level += ch in "(["
                level -= ch in ")]"
                if ch == "|" and level == 0:
                    alts.append(inner[start:k])
                    start = k + 1
            alts.append(inner[start:])
            if c == "[" and rng.random() < 0.5:
                pass
            else:
                out.append(expand(rng.choice(alts), rules, lists, depth + 1))
            i = j + 1
        elif c == "<":
            j = t.index(">", i)
            name = t[i + 1:j]
            if name not in rules:
                raise Open()
            out.append(expand(rules[name], rules, lists, depth + 1))
            i = j + 1
        elif c == "{":
            j = t.index("}", i)
            name = t[i + 1:j].split(":")[0]
            out.append(slot(lists.get(name)))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def slot(spec):
    if not spec or spec.get("wildcard"):
        raise Open()
    if "range" in spec:
        r = spec["range"]
        return str(rng.randrange(r.get("from", 0), r.get("to", 100) + 1, r.get("step", 1) or 1))
    values = spec.get("values") or []
    if not values:
        raise Open()
    v = rng.choice(values)
    v = v.get("in", "") if isinstance(v, dict) else str(v)
    if not isinstance(v, str) or "{" in v:
        raise Open()
    return expand(v, {}, {}, 11) if any(ch in v for ch in "([<") else v


def tidy(s):
    """Collapsed spaces; half the sentences capitalised, as typed rather than spoken."""
    s = re.sub(r"\s+", " ", s).strip()
    return s[:1].upper() + s[1:] if rng.random() < 0.5 else s


def first_sentences(templates, rules, lists, n):
    """The first `n` distinct sentences of 8+ characters that `templates` expand to, in order; a
    template that does not expand is skipped."""
    got = []
    for t in templates:
        try:
            s = tidy(expand(t, rules, lists))
        except (Open, ValueError, IndexError):
            continue
        if len(s) >= 8 and s not in got:
            got.append(s)
        if len(got) == n:
            break
    return got


def home_assistant():
    out = []
    for f in sorted(glob.glob(os.path.join(SRC, "x/home_assistant_intents/home_assistant_intents/data/*.json"))):
        lang = os.path.basename(f)[:-5]
        d = json.load(open(f, encoding="utf-8"))
        templates = [s for name in sorted(d["intents"]) for block in d["intents"][name]["data"] for s in block["sentences"]]
        rng.shuffle(templates)
        got = first_sentences(templates, d.get("expansion_rules", {}), d.get("lists", {}), HA_PER_LANGUAGE)
        out += [(f"ha-{lang}", s) for s in got]
    return out


def ovos():
    by_lang = {}
    for f in sorted(glob.glob(os.path.join(SRC, "x/ovos_skill_*/ovos_skill_*/locale/*/**/*.intent"), recursive=True)):
        lang = f.split("/locale/")[1].split("/")[0].lower()[:2]
        for line in open(f, encoding="utf-8"):
            line = line.strip()
            if "--no-slots" not in sys.argv:
                line = re.sub(r"\{(location|lokation|local|locatie)\}", lambda m: rng.choice(CITIES), line)
                line = re.sub(r"\{(query)\}", lambda m: rng.choice(TOPICS), line)
            if line and not line.startswith("#") and "{" not in line:
                by_lang.setdefault(lang, []).append(line)
    out = []
    for lang in sorted(by_lang):
        lines = sorted(set(by_lang[lang]))
        rng.shuffle(lines)
        got = first_sentences(lines, {}, {}, OVOS_PER_LANGUAGE)
        out += [(f"ovos-{lang}", s) for s in got]
    return out


def main():
    if "--out" not in sys.argv[:-1]:
        sys.exit("usage: intent_sentences.py --out DIR (data/ puts it in the training set)")
    out_dir = sys.argv[sys.argv.index("--out") + 1]
    rows = home_assistant() + ovos()
    held = set()
    for f in ("attacks.jsonl", "benign.jsonl"):
        for l in open(os.path.join(DATA, "..", "eval", "heldout", f), encoding="utf-8"):
            if l.strip():
                held.add(key(json.loads(l)["text"]))
    kept, seen = [], set()
    for group, s in rows:
        k = key(s)
        if k in held or k in seen:
            continue
        seen.add(k)
        kept.append({"text": s, "label": 0, "source": "home-assistant-intents" if group.startswith("ha-") else "ovos-skills", "group": group})
    with open(os.path.join(out_dir, "intents_benign.jsonl"), "w", encoding="utf-8") as f:
        for r in kept:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print("intents_benign.jsonl", len(kept), "languages", len({r["group"] for r in kept}))


if __name__ == "__main__":
    main()
