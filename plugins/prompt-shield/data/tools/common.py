"""Helpers shared by the data tools: the normalised key texts are compared by, and the text of a
Python f-string as the prompt template it is (its placeholders kept as `{name}`)."""

import ast
import re


def key(t):
    """Lowercased, whitespace collapsed: two texts with the same key are the same text."""
    return re.sub(r"\s+", " ", t.lower()).strip()


def fstring_text(node):
    """An `ast.JoinedStr`'s text, each placeholder written as `{...}` (its first 30 characters)."""
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            parts.append(str(v.value))
        else:
            parts.append("{" + ast.unparse(v.value)[:30] + "}")
    return "".join(parts)
