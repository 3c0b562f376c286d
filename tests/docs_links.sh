#!/usr/bin/env bash
# Checks the relative links of the top-level documents and docs/: every linked file exists, and every
# `#anchor` names a heading (GitHub's slug rules) or an explicit `<a id="…">` of the target file; and,
# with no arguments, every `docs/….md#anchor` cited in a source comment. External links (http:, https:,
# mailto:) are not fetched. Exit 1 on any broken link.
#
#   bash tests/docs_links.sh [FILE.md ...]      (default: README.md ARCHITECTURE.md SECURITY.md docs/**/*.md)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - "$@" <<'PY'
import glob, os, re, sys

files = sys.argv[1:] or [f for f in ["README.md", "ARCHITECTURE.md", "SECURITY.md"] if os.path.exists(f)] \
    + sorted(glob.glob("docs/**/*.md", recursive=True))

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")

def prose(text):
    """The lines outside fenced code blocks, with inline code removed."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return out

def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    h = re.sub(r"<[^>]+>", "", heading.strip().lower())
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = h.replace("`", "")
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        seen, result = {}, set()
        text = open(path, encoding="utf-8").read()
        fenced = False
        for line in text.splitlines():
            if FENCE.match(line):
                fenced = not fenced
                continue
            if fenced:
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                result.add(s if n == 0 else f"{s}-{n}")
        result.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
        anchors_cache[path] = result
    return anchors_cache[path]

broken = 0
checked = 0
for f in files:
    for lineno, line in enumerate(prose(open(f, encoding="utf-8").read()), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            if not os.path.exists(dest):
                print(f"{f}:{lineno}: {target}: no such file {dest}")
                broken += 1
                continue
            if anchor:
                if os.path.isdir(dest) or not dest.endswith(".md"):
                    print(f"{f}:{lineno}: {target}: an anchor into a file that is not Markdown")
                    broken += 1
                elif anchor not in anchors(dest):
                    print(f"{f}:{lineno}: {target}: no heading or id `{anchor}` in {dest}")
                    broken += 1

# Citations in code comments: `docs/….md#anchor` (or ARCHITECTURE.md, README.md) must name a real heading.
if not sys.argv[1:]:
    import subprocess
    sources = subprocess.run(["git", "ls-files", "*.rs", "*.sh", "*.py", "*.toml", ".ci/run"],
                             capture_output=True, text=True, check=True).stdout.split()
    cite = re.compile(r"((?:docs/[\w./-]+|ARCHITECTURE|README|SECURITY)\.md)#([\w-]+)")
    for src in sources:
        if "/eval/" in src or "/corpus/" in src or not os.path.isfile(src):
            continue
        try:
            text = open(src, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for path, anchor in cite.findall(line):
                checked += 1
                if not os.path.exists(path):
                    print(f"{src}:{lineno}: {path}#{anchor}: no such file")
                    broken += 1
                elif anchor not in anchors(path):
                    print(f"{src}:{lineno}: {path}#{anchor}: no heading or id `{anchor}`")
                    broken += 1

print(f"{checked} relative links and citations, {broken} broken")
sys.exit(1 if broken else 0)
PY
