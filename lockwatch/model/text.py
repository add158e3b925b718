"""Untrusted text made safe to show: the one sanitiser every view shares.

File names, lock content, SQL queries, host names: whoever writes a lock file or
runs a query controls them. Raw, they could drive the operator's terminal (ESC
and C1 sequences), make `evil\\u202egpj.exe` read as `evilexe.jpg`, or hide
characters so that two different names look alike. The dashboard, `lockwatch ls`,
the prompts of break and steal and the Markdown incident report all pass such
text through `terminal_safe`, so every view spells out the same characters in the
same way and a fix here is a fix everywhere.

Pure: no Rich, no Textual, so the model and the CLI can use it without either.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import TYPE_CHECKING

from lockwatch.model.lazyre import lazy_compile

if TYPE_CHECKING:
    from lockwatch.model.sql_secrets import Span


# Chosen by Unicode general category rather than by listing known-bad characters:
# a list misses the next invisible character, a category does not.
#   Cc      C0 and C1 controls, DEL: they drive the terminal (ESC, CSI U+009B, BEL).
#   Cf      format characters: every bidi control (U+061C, U+200E/F, U+202A-U+202E,
#           U+2066-U+2069), zero-width ones (U+200B-U+200D, U+2060, U+FEFF), the
#           soft hyphen, tag characters: they reorder or hide text.
#   Zl, Zp  U+2028/U+2029: a line break to some renderers and not to others.
#   Co      private use: a meaning only some fonts give it.
#   Cn      unassigned: no one can say how a terminal will draw it.
#   Cs      lone surrogates: a file name that was not UTF-8 (see `_spelled`).
# Spaces (Zs: NBSP, ideographic space...) stay: they advance the cursor like a
# space does, and real names contain them.
ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})

# Text shown over several lines (lock content in the detail pane) keeps its line
# structure; a table cell or a one-line message must not be split or shifted.
_KEPT_MULTILINE = frozenset("\n\t")

# Escaping a long hostile text is not worth keeping: the detail pane shows one at
# a time, and caching many would hold up to ten times their size in memory.
_CACHED_LENGTH = 256


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every character of `ESCAPED_CATEGORIES` written as a visible
    ASCII escape (`\\x1b`, `\\u202e`, `\\U000e0041`; a byte that was not UTF-8 as
    `\\xff`). Newlines and tabs are escaped too unless `keep_newlines`."""
    # str.isprintable() is False exactly for the categories above plus the spaces
    # other than U+0020, so a printable text has nothing to escape: one C-speed
    # pass for the thousands of ordinary cells a screen shows.
    if text.isprintable():
        return text
    if len(text) <= _CACHED_LENGTH:
        return _escaped_cached(text, keep_newlines)
    return _escaped(text, keep_newlines)


def one_line(text: str | None, most: int) -> str:
    """The start of `text` (a session's query) on one line, whitespace folded,
    cut to `most` characters with an ellipsis: its start says what it is."""
    folded = " ".join((text or "").split())
    return folded if len(folded) <= most else folded[: most - 1] + "…"


# Where one line shows an untrusted text, this much of it, then its length.
SHOWN = 120
# What `cut` adds: cut again, a text keeps the length it first had.
_CUT = lazy_compile(r"…\(([0-9,]+) chars\)$")


def cut(text: str, limit: int = SHOWN) -> str:
    """`text` fit for one line: escaped for a terminal, and when longer than
    `limit`, its start and its length (`…(1,048,576 chars)`)."""
    if len(text) <= limit:
        return terminal_safe(text)
    already = _CUT.search(text)
    length = already.group(1) if already else f"{len(text):,}"
    return f"{terminal_safe(text[:limit])}…({length} chars)"


def _escaped(text: str, keep_newlines: bool) -> str:
    kept = _KEPT_MULTILINE if keep_newlines else frozenset()
    category = unicodedata.category
    return "".join(
        _spelled(ch) if ch not in kept and category(ch) in ESCAPED_CATEGORIES else ch for ch in text
    )


# Hostile names come back on every redraw: escape each once.
_escaped_cached = lru_cache(maxsize=4096)(_escaped)


def _spelled(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        # surrogateescape (as in fsdecode): the byte 0xNN of a name that is not UTF-8
        # arrives as U+DCNN. Shown as that byte, like `ls -b` does.
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


# -- secrets in text that others wrote ---------------------------------------------
#
# Other sessions' query text (pg_stat_activity) and connection strings carry
# passwords: `ALTER ROLE x PASSWORD '…'`, `dblink_connect('… password=…')`,
# `postgresql://u:…@h/db`. Whatever shows them (JSON, the detail pane, exports,
# error messages) passes them through `scrub_secrets` first, the one scrubber:
# lockwatch's own DSNs go through it too (sources/postgres/dsn.py).

_MASK = "***"
# A value of `key=value`: quoted the conninfo way, quoted inside an SQL string
# (quotes doubled), double-quoted, or bare up to a space or a quote. A quoted
# value may have been cut short (a query trimmed for display): to the end, then.
_VALUE = (
    r"(?:''(?:[^']|'''')*(?:''|$)"  # inside an SQL string: ''se cret''
    r"|'(?:[^'\\]|\\.)*(?:'|$)"  # conninfo quoting: 'se cret'
    r'|"(?:[^"\\]|\\.)*(?:"|$)'
    r"""|(?:[^\s'"]|'')+)"""  # bare: up to a space or a quote
)
# Passwords (`pass=` of MySQL-style strings too), and the other secrets connection
# strings and JSON carry: `passphrase`, `client_secret`, `access_token`, `api_key`.
_SECRET_KEY = r"(?:pg|ssl)?pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key"
# `=`, or `%3D` inside a URL's query (`?application_name=app%20password%3D…`, where
# no word boundary comes before the key). After an underscore too: the key of
# `client_secret=…` is its last word (the words before it stay as they are).
_KEY_VALUE = lazy_compile(
    rf"(?<![a-z])({_SECRET_KEY})(\s*=\s*|%3D){_VALUE}", re.IGNORECASE | re.ASCII
)
# `"client_secret": "…"`: words before the key, bounded (unbounded, a long run of
# letters after each quote would be read to its end, and again after the next).
_JSON_VALUE = lazy_compile(
    rf"""("(?:[a-z0-9_-]{{0,64}}[_-])?(?:{_SECRET_KEY})"\s*:\s*)"(?:[^"\\]|\\.)*(?:"|$)""",
    re.IGNORECASE | re.ASCII,
)
# scheme://user:password@host: up to the last @ before the path, so a password
# with an unencoded @ in it is hidden whole.
_URL_USERINFO = lazy_compile(
    r"""(\b[a-z][a-z0-9+.-]*://[^\s:/@'"]*):[^\s/'"]*@""", re.IGNORECASE | re.ASCII
)
# Cheap first look: most query text has none of these, and is returned as is.
_MAYBE = lazy_compile(r"pass|pwd|secret|token|api[_-]?key|identified|://", re.IGNORECASE)


def scrub_secrets(text: str) -> str:
    """`text` with every password-looking value replaced by `***`: key=value
    (`password=…`, `PGPASSWORD=…`, `sslpassword=…`, `pass=…`, `client_secret=…`,
    `access_token=…`, `api_key=…`), JSON (`"password": "…"`, `"token": "…"`),
    URL user info (`scheme://user:…@host`), and SQL's literals after PASSWORD,
    IDENTIFIED BY and their kin however they are quoted, and the same again
    inside any literal or comment (model/sql_secrets.py)."""
    if not _MAYBE.search(text):
        return text
    # Loaded for the text that may hold one: a dashboard or `ls` of lock files
    # never pays for SQL's lexers.
    from lockwatch.model.sql_secrets import secret_spans

    pieces: list[str] = []
    at = 0
    for span in secret_spans(text, _other_secrets, _maybe):
        pieces += (text[at : span.start], span.mask)
        at = span.end
    return "".join(pieces) + text[at:] if pieces else text


def _maybe(text: str) -> bool:
    return bool(_MAYBE.search(text))


def _other_secrets(text: str) -> list[Span]:
    """The secrets that are not SQL's own: URL user info, key=value, JSON."""
    from lockwatch.model.sql_secrets import Span

    if not _MAYBE.search(text):
        return []
    spans = [Span(m.end(1) + 1, m.end() - 1, _MASK) for m in _URL_USERINFO.finditer(text)]
    spans += (Span(m.end(2), m.end(), _MASK) for m in _KEY_VALUE.finditer(text))
    spans += (Span(m.end(1), m.end(), f'"{_MASK}"') for m in _JSON_VALUE.finditer(text))
    return spans


# Options whose next argument is a password (`--password hunter2`).
_PASSWORD_OPTIONS = lazy_compile(
    r"--?(?:(?:pg|ssl)?(?:pass(?:word|wd|phrase)?|pwd)|(?:[a-z]+-)*(?:secret|token|api-?key))",
    re.IGNORECASE | re.ASCII,
)


def scrub_arguments(arguments: tuple[str, ...]) -> tuple[str, ...]:
    """A command line with its passwords replaced by `***`: each argument as
    `scrub_secrets` does, and the argument after a password option."""
    out = []
    hide = False
    for argument in arguments:
        # psql's `--password` is a flag (prompt for it): the option after it stays.
        hidden = hide and not argument.startswith("-")
        out.append(_MASK if hidden else scrub_secrets(argument))
        hide = bool(_PASSWORD_OPTIONS.fullmatch(argument))
    return tuple(out)
