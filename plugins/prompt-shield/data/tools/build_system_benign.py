"""Build `data/eval/system_benign.jsonl`: benign system prompts and prompt
templates that real applications send in non-user roles, for measuring Prompt
Shield's false-positive rate on caller-supplied system / assistant / developer
text and on pass-through fields (tool descriptions). Never used for training:
The trainer (`examples/train`) reads only `data/*.jsonl`, not this subfolder.

Sources (MIT-licensed PyPI wheels, unpacked with `pip download --no-deps` and
`unzip`; pass the folders in this order):
  llama-index-core 0.14.25 (MIT): module-level prompt constants (`*PROMPT*`,
      `*TMPL*`, `*TEMPLATE*`, `*SYSTEM*`) and `ChatMessage(content=...)` texts
  crewai 1.15.30 (MIT): `crewai/translations/en.json` (agent system prompts,
      tool descriptions, instructions)
  autogen-agentchat 0.7.5 (MIT): module-level prompt constants

    python3 build_system_benign.py LLAMA_DIR CREWAI_DIR AUTOGEN_DIR > ../eval/system_benign.jsonl

Template placeholders (`{role}`, `{context_str}`) are kept as shipped: that is
what a template-driven application sends when a slot is empty, and filling
them would be our text, not theirs. Texts shorter than 60 characters are
skipped. Output is sorted and deduplicated, so the file is reproducible.
"""

import ast
import json
import pathlib
import sys

KEYS = ("PROMPT", "TMPL", "SYSTEM", "TEMPLATE", "INSTRUCTION")


def python_prompts(root, package):
    out = []
    for f in sorted(pathlib.Path(root).rglob("*.py")):
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            value = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if any(k in node.targets[0].id.upper() for k in KEYS):
                    value = node.value
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ChatMessage":
                value = next((k.value for k in node.keywords if k.arg == "content"), None)
            if value is None:
                continue
            try:
                v = ast.literal_eval(value)
            except (ValueError, SyntaxError, TypeError):
                continue
            if isinstance(v, str):
                out.append((v, f"{package}:{f.relative_to(root)}"))
    return out


def json_strings(path, package):
    out = []

    def walk(x, p):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{p}.{k}")
        elif isinstance(x, str):
            out.append((x, f"{package}:translations/en.json{p}"))

    walk(json.loads(pathlib.Path(path).read_text(encoding="utf-8")), "")
    return out


def main():
    llama, crew, autogen = sys.argv[1:4]
    items = python_prompts(llama, "llama-index-core 0.14.25 (MIT)")
    items += json_strings(pathlib.Path(crew) / "crewai/translations/en.json", "crewai 1.15.30 (MIT)")
    items += python_prompts(autogen, "autogen-agentchat 0.7.5 (MIT)")
    seen = set()
    rows = []
    for text, source in items:
        t = text.strip()
        if len(t) < 60 or t in seen:
            continue
        seen.add(t)
        rows.append({"text": t, "label": 0, "source": source})
    rows.sort(key=lambda r: (r["source"], r["text"]))
    for r in rows:
        print(json.dumps(r, ensure_ascii=False))


if __name__ == "__main__":
    main()
