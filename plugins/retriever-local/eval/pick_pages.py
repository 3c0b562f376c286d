"""Prints the seeded choice of pages (and, for pages, one paragraph) that the
held-out questions were written from. Usage: python3 pick_pages.py NAME [N]

Seed 32 (the issue's number). debian-faq: 60 of its sections (each is one
FAQ question; the question is rewritten in other words). postgres-admin and
perl-manual: 60 pages each, one paragraph of at least 200 characters chosen
from each, and the question written from that paragraph.
"""
import random
import sys
from pathlib import Path

name = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 60
pages = sorted(p.name for p in (Path(__file__).with_name("heldout") / name / "corpus").glob("*.txt"))
rng = random.Random(32)
chosen = rng.sample(pages, min(n, len(pages)))
for page in chosen:
    text = (Path(__file__).with_name("heldout") / name / "corpus" / page).read_text(encoding="utf-8")
    paras = [p.strip() for p in text.split("\n\n") if len(p.strip()) >= 200]
    para = rng.choice(paras) if paras else text[:600]
    print(f"### {page}\n{text.splitlines()[0]}\n{para[:700]}\n")
