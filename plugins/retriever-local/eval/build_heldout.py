"""Builds the held-out evaluation corpora (heldout/*/corpus/) from Debian packages.

Usage (see README.md, "Held-out corpora"):

    mkdir -p /tmp/debs && cd /tmp/debs
    apt-get download debian-faq=11.1 postgresql-doc-15=15.20-0+deb12u1 perl-doc=5.36.0-7+deb12u4
    for d in *.deb; do dpkg-deb -x "$d" root; done
    python3 build_heldout.py /tmp/debs/root

Deterministic: the same packages give the same files (sorted walks, no
timestamps). Needs only Python 3's standard library and `pod2text` (from the
perl package, for the Perl pages).
"""
import html
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(sys.argv[1])
OUT = Path(__file__).with_name("heldout")

BLOCK = {"p", "div", "dl", "dt", "dd", "ul", "ol", "li", "table", "tr", "br", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"}
HEADING = {"h1": "=", "h2": "=", "h3": "-", "h4": "~", "h5": "~", "h6": "~"}


class Text(HTMLParser):
    """HTML to plain text: blocks become lines, headings become underlined lines."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.buf, self.pre, self.heading, self.skip = [], [], 0, None, 0

    def flush(self):
        s = "".join(self.buf)
        self.buf = []
        if self.pre:
            if s.strip():
                self.out.append(s.rstrip("\n"))
            return
        s = re.sub(r"\s+", " ", s).strip()
        if not s:
            return
        if self.heading:
            self.out.append("\n" + s + "\n" + self.heading * max(3, len(s)) + "\n")
        else:
            self.out.append(s)

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        if tag in BLOCK:
            self.flush()
        if tag in HEADING:
            self.heading = HEADING[tag]
        if tag == "pre":
            self.pre += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.skip -= 1
        if tag in BLOCK:
            self.flush()
        if tag in HEADING:
            self.heading = None
        if tag == "pre":
            self.pre -= 1

    def handle_data(self, data):
        if not self.skip:
            self.buf.append(data)

    def text(self):
        self.flush()
        return re.sub(r"\n{3,}", "\n\n", "\n\n".join(self.out)).strip() + "\n"


def to_text(fragment):
    p = Text()
    p.feed(fragment)
    p.close()
    return p.text()


def write(name, pages):
    out = OUT / name / "corpus"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.txt"):
        old.unlink()
    for page, text in sorted(pages.items()):
        (out / page).write_text(text, encoding="utf-8")
    size = sum(len(t.encode()) for t in pages.values())
    print(f"{name}: {len(pages)} pages, {size / 1e6:.2f} MB")


def debian_faq():
    """One page per section (h2) of the Debian FAQ's chapters."""
    faq = ROOT / "usr/share/doc/debian/FAQ"
    pages = {}
    for f in sorted(faq.glob("*.en.html")):
        chapter = f.name[: -len(".en.html")]
        if chapter == "index":
            continue
        body = f.read_text(encoding="utf-8")
        body = body[: body.find('<div class="navfooter">')]
        parts = re.split(r'<div class="section"><div class="titlepage"><div><div><h2 class="title"><a id="([^"]+)"></a>', body)
        for i in range(1, len(parts), 2):
            sid, chunk = parts[i], parts[i + 1]
            title, rest = chunk.split("</h2>", 1)
            title = re.sub(r"^[0-9.]+\s*", "", html.unescape(re.sub(r"<[^>]+>", "", title))).strip()
            title = re.sub(r"\s+", " ", title)
            text = title + "\n" + "*" * max(3, len(title)) + "\n\n" + to_text(rest)
            pages[f"{chapter}-{sid}.txt"] = text
    write("debian-faq", pages)


def postgres_admin():
    """The pages of PostgreSQL 15's Part III, Server Administration (linked from admin.html)."""
    docs = ROOT / "usr/share/doc/postgresql-doc-15/html"
    index = (docs / "admin.html").read_text(encoding="utf-8")
    names = sorted(set(re.findall(r'href="([a-z0-9-]+\.html)', index)) - {"admin.html", "index.html"})
    pages = {}
    for name in names:
        body = (docs / name).read_text(encoding="utf-8")
        title = html.unescape(re.search(r"<title>(.*?)</title>", body, re.S).group(1))
        title = re.sub(r"\s+", " ", title).strip()
        start = body.find('<hr /></div>')
        end = body.find('<div class="navfooter">')
        body = body[start + len('<hr /></div>') : end]
        body = re.sub(r'<div class="toc">.*?</dl></div>', "", body, flags=re.S)
        pages[name[: -len(".html")] + ".txt"] = title + "\n" + "*" * max(3, len(title)) + "\n\n" + to_text(body)
    write("postgres-admin", pages)


# Release notes and history, generated API/property lists, licence texts,
# and the pages in Chinese, Japanese and Korean.
SKIP_PERL = {"perlhist", "perltoc", "perlapi", "perlintern", "perluniprops", "perlgpl", "perlartistic", "perlcn", "perljp", "perlko", "perltw"}


def perl_manual():
    """The Perl 5.36 manual pages (pod/), without perl*delta and SKIP_PERL."""
    pod = ROOT / "usr/share/perl/5.36.0/pod"
    pages = {}
    for f in sorted(pod.glob("*.pod")):
        stem = f.stem
        if re.fullmatch(r"perl\d*delta", stem) or stem in SKIP_PERL:
            continue
        text = subprocess.run(["pod2text", "-u", "-w", "76", str(f)], capture_output=True, text=True, check=True).stdout
        m = re.search(r"^NAME\n\s+(.+)$", text, re.M)
        title = m.group(1).strip() if m else stem
        pages[stem + ".txt"] = title + "\n" + "*" * max(3, len(title)) + "\n\n" + text
    write("perl-manual", pages)


debian_faq()
postgres_admin()
perl_manual()
