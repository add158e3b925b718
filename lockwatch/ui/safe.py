"""Text from lock files and servers, made safe to put on a terminal.

Anything a lock's writer or a database user controls (names, holders, queries,
content) may carry escape sequences or bidirectional overrides. Shown raw, they
would drive the operator's terminal or disguise what a line says; here every
such character becomes a visible escape, by the rules of the sanitiser the CLI
and the incident report share (`lockwatch.model.text`).
"""

from __future__ import annotations

from rich.text import Text

from lockwatch.model.text import terminal_safe


def clean(text: str, keep_newlines: bool = False) -> str:
    """`text` with control, bidi and invisible characters spelled out."""
    return terminal_safe(text, keep_newlines=keep_newlines)


def safe(text: object, style: str = "", keep_newlines: bool = False) -> Text:
    """A Rich Text of `text`, cleaned; never parsed as markup."""
    return Text(terminal_safe(str(text), keep_newlines=keep_newlines), style=style)
