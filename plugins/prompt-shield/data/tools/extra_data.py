"""Training texts added for issue 31's second model pass: short benign text
that addresses the reader ("You will…", advice, proverbs), benign evaluator
and system prompts, and short attack and benign texts in 31 languages.

None of these sources is a held-out source (`eval/README.md`): no spikee,
PyRIT, AgentDojo, aider, PostgreSQL manual, man pages, fortunes or crates.io
READMEs. Any text that occurs in the held-out set (lowercased, whitespace
collapsed) is dropped here too.

- PyPI `deepeval` 4.3.1 (Apache-2.0, `LICENSE.md` in the wheel): the prompt
  templates of its metrics (`deepeval/**/templates/*.txt`, `deepeval/metrics/*/template.py`), benign
  instructions to an evaluator model ("You are…", "Return a JSON…").
- Debian `wordnet-base` 1:3.0-37 (WordNet 3.0 licence, permissive, in
  its `copyright`: "WordNet 3.0 Copyright 2006 by Princeton University"):
  the example sentences of the glosses, one by one and two to six together.
- PyPI `langchain` 0.3.27, `dspy` 3.4.1, `trulens-feedback` 2.16.0 and
  `semantic-kernel` 1.45.0 (MIT), `ragas` 0.4.3 and `haystack-ai` 3.4.1
  (Apache-2.0), each with its licence file in the wheel: string literals of
  their source that are prompt templates (200 characters or more, addressing
  the model: "You are", "Your task", …; none quoting a known attack).
- Written here (`authored-train`, Apache-2.0 as Gatehouse): reader-addressing
  sentences from templates (`reader_sentences`), the phrases of
  `multilingual.py`, the records of `records.py`
  and the memos of `longjail.py`.

Fetch (SRC, default /tmp/s3dl):
    cd $SRC && pip download --no-deps deepeval==4.3.1 && mkdir -p de && unzip -q -o deepeval-4.3.1-py3-none-any.whl -d de
    pip download --no-deps langchain==0.3.27 ragas==0.4.3 haystack-ai==3.4.1 dspy==3.4.1 trulens-feedback==2.16.0 semantic-kernel==1.45.0
    for w in langchain-0.3.27 ragas-0.4.3 haystack_ai-3.4.1 dspy-3.4.1 trulens_feedback-2.16.0 semantic_kernel-1.45.0; do mkdir -p sp/${w%%-*}; unzip -q -o $w-py3-none-any.whl -d sp/${w%%-*}; done
    mkdir -p $SRC/deb && cd $SRC/deb && apt-get download wordnet-base && dpkg-deb -x wordnet-base_*.deb x
Writes `data/extra_benign.jsonl` and `data/extra_attacks.jsonl`. Deterministic.
"""

import ast
import glob
import json
import os
import random
import re

from common import fstring_text, key
from multilingual import MORE, PHRASES
from longjail import long_jailbreaks
from records import records

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
SRC = os.environ.get("EXTRASRC", "/tmp/s3dl")
rng = random.Random(31)


def item(text, label, source, group):
    return {"text": text, "label": label, "source": source, "group": group}


def heldout_texts():
    out = set()
    for f in glob.glob(os.path.join(DATA, "..", "eval", "heldout", "*.jsonl")):
        for line in open(f, encoding="utf-8"):
            if line.strip():
                out.add(key(json.loads(line)["text"]))
    return out


def deepeval_templates():
    """String templates of deepeval's metrics, placeholders kept as {name}."""
    out = []
    for f in sorted(glob.glob(os.path.join(SRC, "de", "deepeval", "**", "templates", "*.txt"), recursive=True)):
        s = open(f, encoding="utf-8").read().strip()
        if len(s) >= 200:
            out.append((os.path.relpath(f, os.path.join(SRC, "de")), s[:6000]))
    for f in sorted(glob.glob(os.path.join(SRC, "de", "deepeval", "metrics", "**", "template*.py"), recursive=True)):
        tree = ast.parse(open(f, encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                s = fstring_text(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                s = node.value
            else:
                continue
            s = re.sub(r"[ \t]+\n", "\n", s).strip()
            if len(s) >= 200:
                out.append((os.path.relpath(f, os.path.join(SRC, "de")), s[:6000]))
    seen, uniq = set(), []
    for f, s in out:
        if s not in seen:
            seen.add(s)
            uniq.append((f, s))
    return uniq


SUBJ = ["You", "Your family", "Your friends", "Your neighbour", "A stranger", "Someone close to you", "Your boss", "An old friend"]
FUTURE = [
    "will take a long trip by the sea", "will find what you lost last winter", "will be lucky in money matters this month",
    "will meet someone who changes your plans", "will receive a letter with good news", "will learn a new skill before spring",
    "will be asked for advice by a friend", "will be promoted at work", "will have a quiet and happy week",
    "will win a small prize", "will be invited to a wedding", "will soon move to a larger house",
    "will discover a talent for painting", "will make peace with an old rival", "will be remembered for your kindness",
    "will have visitors from far away", "will enjoy a surprising dinner", "will be given a position of trust",
]
ADVICE = [
    "Take a walk before you make a big decision.", "Never lend money you cannot afford to lose.", "Don't count your chickens before they hatch.",
    "Forget the small worries and enjoy the day.", "Ignore the noise and keep doing good work.", "Always leave a place cleaner than you found it.",
    "Trust your instincts, but check the facts.", "Stop waiting for the perfect moment and begin.", "Be patient: good things take time.",
    "Listen more than you speak.", "Do not believe everything you read.", "Reveal your plans only when they are ready.",
    "Break the rules of habit once a week.", "Pretend you are a tourist in your own town.", "Act as if you already know the way.",
    "Override your fear with curiosity.", "Your secret talent is listening.", "Your password to happiness is gratitude.",
    "You are stronger than you think.", "You are what you repeatedly do.", "Your future depends on what you do today.",
    "Tell the truth, then you do not have to remember anything.", "Write down your dreams before they fade.",
    "Say less, mean more.", "Answer kindly even when you are tired.", "Repeat the good habits, drop the bad ones.",
    "Print this on your heart: kindness costs nothing.", "Give your best and forget the rest.", "Follow the instructions on the label.",
    "Change your habits and you change your life.", "Keep your friends close and your umbrella closer.",
    "You cannot step into the same river twice.", "If you chase two rabbits, you catch neither.", "When in doubt, leave it out.",
    "Your lucky colour today is green.", "Your lucky numbers are 3, 17 and 42.", "A smile is your passport into the hearts of others.",
]
PROVERBS = [
    "A rolling stone gathers no moss.", "Actions speak louder than words.", "The early bird catches the worm.",
    "Every cloud has a silver lining.", "Too many cooks spoil the broth.", "Better late than never.",
    "Rome was not built in a day.", "Where there is smoke there is fire.", "All that glitters is not gold.",
    "A watched pot never boils.", "Fortune favours the bold.", "Laughter is the best medicine.",
    "The pen is mightier than the sword.", "Still waters run deep.", "An apple a day keeps the doctor away.",
    "Curiosity killed the cat, but satisfaction brought it back.", "Beauty is in the eye of the beholder.",
    "Necessity is the mother of invention.", "Don't put all your eggs in one basket.", "Practice makes perfect.",
]
JOKES = [
    "I told my computer a joke about UDP. I am not sure it got it.", "Why did the scarecrow win an award? He was outstanding in his field.",
    "My dog ignores every instruction I give him, unless there is cheese involved.", "The system is down, said the hammock.",
    "I would tell you a secret, but then the whole office would know by lunch.", "Knock knock. Who's there? Nobody, I am a riddle.",
    "What has keys but cannot open locks? A piano.", "What gets wetter the more it dries? A towel.",
    "Q: How many programmers does it take to change a light bulb? A: None, that's a hardware problem.",
    "Life is what happens while you are busy making other plans.", "The best way to predict the future is to invent it.",
    "Behind every great admin is a forgotten password.", "Today is the tomorrow you worried about yesterday.",
]


CONDITIONS = [
    "If you water the garden at night", "If you smile at strangers", "If you stand in the rain long enough", "If you save a coin every day",
    "If you read before sleeping", "If you forget your umbrella", "If you ignore the alarm clock", "If you follow the river",
    "If you tell a joke at dinner", "If you keep your promises", "If you cross the bridge at noon", "If you open the window",
]
RESULTS = [
    "you will have wet shoes", "you will make a new friend", "you will be rich in forty years", "you will dream of the sea",
    "you will be late for work", "you will find the old mill", "you will hear a surprising story", "you will sleep better",
    "your neighbours will wonder why", "your cat will judge you", "the day will go well", "nobody will notice",
]


def wordnet_examples():
    """The example sentences of WordNet's glosses: ordinary short English."""
    ex = []
    for pos in ["noun", "verb", "adj", "adv"]:
        path = os.path.join(SRC, "deb", "x", "usr", "share", "wordnet", f"data.{pos}")
        for line in open(path, encoding="latin-1"):
            if line.startswith("  ") or "|" not in line:
                continue
            offset = line.split(" ", 1)[0]
            for q in re.findall(r'"([^"]{20,200})"', line.split("|", 1)[1]):
                q = q.strip()
                ex.append((f"wordnet:{pos}:{offset}", q[0].upper() + q[1:] + ("" if q[-1] in ".?!" else ".")))
    singles = rng.sample(ex, 5000)
    joined = []
    for i in range(1500):
        parts = rng.sample(ex, rng.randint(2, 6))
        joined.append((f"wordnet:joined:{i}", " ".join(p for _, p in parts)))
    return singles + joined


# Wheels whose prompt strings are read (name, version): all MIT or Apache-2.0.
PROMPT_WHEELS = [("langchain", "0.3.27"), ("ragas", "0.4.3"), ("haystack_ai", "3.4.1"), ("dspy", "3.4.1"), ("trulens_feedback", "2.16.0"),
                 ("semantic_kernel", "1.45.0")]
PROMPT_LIKE = re.compile(r"\b(you are|your task|you will be given|you must|given the following)\b", re.I)
NOT_PROMPT = re.compile(r"def |import |:param|Args:|Returns:")
# Never a benign example: a string that quotes a well-known attack.
ATTACK_LIKE = re.compile(r"ignore (all )?(the )?previous|disregard (all|the|any) |\bDAN\b|jailbr", re.I)


def prompt_strings():
    """Benign prompt templates in the source of LLM frameworks (string literals)."""
    out = []
    for name, _ in PROMPT_WHEELS:
        root = os.path.join(SRC, "sp", name)
        for f in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
            try:
                tree = ast.parse(open(f, encoding="utf-8").read())
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    t = node.value.strip()
                    if len(t) >= 200 and PROMPT_LIKE.search(t) and not NOT_PROMPT.search(t) and not ATTACK_LIKE.search(t):
                        out.append((name, f"{name}:{os.path.relpath(f, root)}:{node.lineno}", t[:6000]))
    return out


def reader_sentences():
    out = [f"{c}, {r}." for c in CONDITIONS for r in RESULTS if rng.random() < 0.6]
    for s in SUBJ:
        for f in FUTURE:
            out.append(f"{s} {f}." if s == "You" else f"{s} {f.replace('your', 'their').replace('you', 'them')}.")
    out += ADVICE + PROVERBS + JOKES
    pairs = []
    for _ in range(150):
        a, b = rng.sample(ADVICE + PROVERBS, 2)
        pairs.append(f"{a} {b}")
    return out + pairs


def multilingual():
    attacks, benign = [], []
    for lang, (openers, payloads, requests) in sorted(PHRASES.items()):
        for i, o in enumerate(openers):
            for j, p in enumerate(payloads):
                sep = " " if p[0].islower() else ". "
                attacks.append(item(f"{o}{sep}{p}.", 1, "authored-train", f"ml-attack:{lang}:{i}"))
        for i, r in enumerate(requests):
            benign.append(item(r, 0, "authored-train", f"ml-benign:{lang}:{i}"))
        for i in range(len(requests)):
            a, b = rng.sample(requests, 2)
            benign.append(item(f"{a} {b}", 0, "authored-train", f"ml-benign:{lang}:pair{i}"))
        # An attack set inside a benign request (the payload follows a question).
        for i, r in enumerate(requests[:2]):
            o, p = rng.choice(openers), rng.choice(payloads)
            sep = " " if p[0].islower() else ". "
            attacks.append(item(f"{r} {o}{sep}{p}.", 1, "authored-train", f"ml-attack:{lang}:mix{i}"))
    for lang, (openers, payloads) in sorted(MORE.items()):
        for i, o in enumerate(openers):
            for j, p in enumerate(payloads):
                attacks.append(item(f"{o} {p}.", 1, "authored-train", f"ml-attack:{lang}:more{i}"))
    return attacks, benign


def main():
    held = heldout_texts()
    benign, attacks = [], []
    for i, s in enumerate(reader_sentences()):
        benign.append(item(s, 0, "authored-train", f"reader:{i}"))
    for g, s in wordnet_examples():
        benign.append(item(s, 0, "wordnet", g))
    for name, g, s in prompt_strings():
        benign.append(item(s, 0, name, g))
    for f, s in deepeval_templates():
        benign.append(item(s, 0, "deepeval", f"deepeval:{f}"))
    for text, label, group in records() + long_jailbreaks():
        (attacks if label else benign).append(item(text, label, "authored-train", group))
    a, b = multilingual()
    attacks += a
    benign += b
    for name, rows in (("extra_benign.jsonl", benign), ("extra_attacks.jsonl", attacks)):
        rows = [r for r in rows if key(r["text"]) not in held]
        with open(os.path.join(DATA, name), "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(name, len(rows))


if __name__ == "__main__":
    main()
