"""Regenerates corpus/ from CPython's pydoc topics (see README.md).

Usage: python3 extract_corpus.py /usr/lib/python3.11/pydoc_data/topics.py
"""
import runpy
import sys
from pathlib import Path

topics = runpy.run_path(sys.argv[1])["topics"]
out = Path(__file__).with_name("corpus")
out.mkdir(exist_ok=True)
for name, text in sorted(topics.items()):
    (out / f"{name}.txt").write_text(text, encoding="utf-8")
print(f"{len(topics)} pages written to {out}")
