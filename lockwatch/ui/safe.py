"""Text from lock files and servers, made safe to put on a terminal.

Anything a lock's writer or a database user controls (names, holders, queries,
content) may carry escape sequences or bidirectional overrides. Shown raw, they
would drive the operator's terminal or disguise what a line says; here every
such character becomes a visible escape.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from rich.text import Text

# Characters that reorder or hide text: shown, never obeyed.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _visible(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


@lru_cache(maxsize=4096)
def clean(text: str, keep_newlines: bool = False) -> str:
    """`text` with control characters and bidi overrides spelled out."""
    if text.isprintable() and not any(ch in _BIDI for ch in text):
        return text
    out = []
    for ch in text:
        if ch == "\n" and keep_newlines:
            out.append(ch)
        elif ch in _BIDI or (not ch.isprintable() and unicodedata.category(ch) != "Zs"):
            out.append(_visible(ch))
        else:
            out.append(ch)
    return "".join(out)


def safe(text: object, style: str = "", keep_newlines: bool = False) -> Text:
    """A Rich Text of `text`, cleaned; never parsed as markup."""
    return Text(clean(str(text), keep_newlines), style=style)
