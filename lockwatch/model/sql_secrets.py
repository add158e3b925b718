"""Where SQL text keeps its passwords: the string literals after PASSWORD,
IDENTIFIED BY, `password =` and their kin, however they are quoted, and any text
inside a literal or a comment (a statement passed to dblink_exec, a conninfo).

Regular expressions over raw SQL miss what quoting hides: `PASSWORD ''x''`
inside a literal, `E'…\\'…'`, `U&'…'`, `password/**/'…'`, `$tag$…$tag$`. So the
text is read as the server's lexer reads it — literals, quoted identifiers and
comments, each to its own end — and a literal's content is read again as text
of its own (with its escapes undone), a few levels deep.

Which dialect a text is in is not known (pg_stat_activity is PostgreSQL's, the
processlist MySQL's, an error message either), and they disagree on backslashes
(`'a\\'` ends there for PostgreSQL, not for MySQL), on `#` and on `$$`. So it is
read both ways, and what either reading calls a secret is hidden: a wrong
reading can only hide more.

Pure: `secret_spans` answers where; text.py's `scrub_secrets` does the hiding.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from lockwatch.model.lazyre import lazy_compile

MASK = "'***'"
# A literal holding a statement holding a literal...: deeper than this is not
# SQL anyone sends, and reading it again costs a pass over the text each time.
MAX_DEPTH = 4

# A word that names a secret when a literal follows it (`PASSWORD 'x'`,
# `MASTER_PASSWORD = 'x'`, `OPTIONS (password 'x')`, `SET token = 'x'`).
_SECRET_WORD = lazy_compile(
    r"(?:\w*_)?(?:(?:pg|ssl)?pass(?:word|wd|phrase)|pwd|secret|token|api_?key|auth_string)",
    re.IGNORECASE,
)
# After IDENTIFIED (CREATE/ALTER USER, GRANT): BY 'x', WITH plugin AS 'hash',
# REPLACE 'current'.
_AFTER_IDENTIFIED = frozenset({"by", "as", "replace"})


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    mask: str


@dataclass(frozen=True, slots=True)
class _Dialect:
    # One token at a time, after any space: its group says which kind it is, and
    # a literal's or comment's body is its `…body` group. Compiled on first use
    # (`tokens`): most text has nothing that could be a secret and is never read
    # here, and compiling costs every process that imports this ~10 ms.
    source: str
    escapes: dict[str, re.Pattern[str] | None]  # a literal kind's escapes
    nested_comments: bool

    @property
    def tokens(self) -> re.Pattern[str]:
        return _compiled(self.source)


@cache
def _compiled(source: str) -> re.Pattern[str]:
    return re.compile(source, re.VERBOSE | re.DOTALL)


# The words that matter: a secret's name, and the words of IDENTIFIED BY and SET
# PASSWORD. Every other word, with the space and operators around it, is read as
# one run (and so is a literal too short to hold a secret's name, where no
# secret's name is before it): a megabyte of words is a few tokens, not a million.
_KEYWORD = (
    r"(?i:(?:\w*_)?(?:(?:pg|ssl)?pass(?:word|wd|phrase)|pwd|secret|token|api_?key|auth_string)"
    r"|identified|by|as|replace|set)(?![\w$])"
)
# Bodies run to the closing quote, or to the end of the text (a query cut short
# for display). Possessive: a megabyte of quotes is read once.
_PG = _Dialect(
    source=(
        r"""\s*(?:
        (?P<line>--(?P<linebody>[^\n]*))
        |(?P<block>/\*)
        |(?P<e>[eE]'(?P<ebody>(?:[^'\\]+|''|\\.)*+)'?)
        |(?P<s>(?:[uU]&|[nNbBxX]|_[A-Za-z0-9]+)?'(?P<sbody>(?:[^']+|'')*+)'?)
        |(?P<dollar>\$(?P<tag>(?:[^\W\d]\w*)?)\$(?P<dollarbody>.*?)(?:\$(?P=tag)\$|\Z))
        |(?P<ident>"(?P<identbody>KEYWORD)")
        |(?P<word>KEYWORD)
        |(?P<op>[=(;])
        |(?P<other>(?:
            \s+
            |(?!KEYWORD)(?>\w[\w$]*)(?!['&])
            |(?!"KEYWORD")"(?:[^"]+|"")*+"?
            |'[^'\\]{0,3}'(?!')
            |[^\w\s'"$/;=(\-]|/(?!\*)|-(?!-)|\$(?!(?:[^\W\d]\w*)?\$)
        )++)
        |(?P<bare>\w[\w$]*)
        |(?P<any>.)
        )""".replace("KEYWORD", _KEYWORD)
    ),
    escapes={"e": re.compile(r"''|\\.", re.DOTALL), "s": re.compile("''"), "dollar": None},
    nested_comments=True,
)
_MYSQL = _Dialect(
    source=(
        r"""\s*(?:
        (?P<line>(?:\#|--(?=\s|\Z))(?P<linebody>[^\n]*))
        |(?P<exec>/\*[!+][0-9]*)
        |(?P<block>/\*)
        |(?P<e>(?:_[A-Za-z0-9]+|[nNbBxX])?'(?P<ebody>(?:[^'\\]+|''|\\.)*+)'?)
        |(?P<q>"(?P<qbody>(?:[^"\\]+|""|\\.)*+)"?)
        |(?P<ident>`(?P<identbody>KEYWORD)`)
        |(?P<word>KEYWORD)
        |(?P<op>[=(;])
        |(?P<other>(?:
            \s+
            |(?!KEYWORD)(?>\w[\w$]*)(?!')
            |(?!`KEYWORD`)`(?:[^`]+|``)*+`?
            |'[^'\\]{0,3}'(?!')|"[^"\\]{0,3}"(?!")
            |[^\w\s'"`/\#;=(\-]|/(?!\*)|-(?!-(?:\s|\Z))
        )++)
        |(?P<bare>\w[\w$]*)
        |(?P<any>.)
        )""".replace("KEYWORD", _KEYWORD)
    ),
    escapes={"e": re.compile(r"''|\\.", re.DOTALL), "q": re.compile(r'""|\\.', re.DOTALL)},
    nested_comments=False,
)
DIALECTS = (_PG, _MYSQL)
_LITERALS = frozenset({"e", "s", "dollar", "q"})
_BODY = {kind: f"{kind}body" for kind in ("e", "s", "dollar", "q", "ident", "line")}

_BACKSLASH_MEANS = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0", "Z": "\x1a"}


def _unescape(match: re.Match[str]) -> str:
    text = match.group()
    if text[0] == "\\":
        return _BACKSLASH_MEANS.get(text[1], text[1])
    return text[0]


@dataclass(frozen=True)
class _Body:
    """A literal's (or comment's) content, escapes undone, and where each of its
    characters was in the raw text."""

    text: str
    start: int  # of the body in the raw text
    end: int
    # Segments: decoded offset where each starts, its raw offset, and whether it
    # is one escape (a decoded character written as two or more).
    seg_decoded: tuple[int, ...] = ()
    seg_raw: tuple[int, ...] = ()
    seg_escape: tuple[bool, ...] = ()
    quote: str = ""  # the quote a mask must double inside this body ("": none)

    def raw(self, offset: int) -> int:
        """The raw offset of decoded character `offset` (its escape's start)."""
        if offset >= len(self.text):
            return self.end
        if not self.seg_decoded:
            return self.start + offset
        k = bisect_right(self.seg_decoded, offset) - 1
        if self.seg_escape[k]:
            return self.seg_raw[k]
        return self.seg_raw[k] + offset - self.seg_decoded[k]

    def encode(self, mask: str) -> str:
        return mask.replace(self.quote, self.quote * 2) if self.quote else mask


def _body(raw: str, start: int, end: int, escapes: re.Pattern[str] | None, quote: str) -> _Body:
    content = raw[start:end]
    if escapes is None or not escapes.search(content):
        return _Body(content, start, end, quote=quote)
    decoded: list[str] = []
    seg_decoded: list[int] = []
    seg_raw: list[int] = []
    seg_escape: list[bool] = []
    length = 0
    at = 0
    for match in escapes.finditer(content):
        if match.start() > at:
            seg_decoded.append(length)
            seg_raw.append(start + at)
            seg_escape.append(False)
            decoded.append(content[at : match.start()])
            length += match.start() - at
        seg_decoded.append(length)
        seg_raw.append(start + match.start())
        seg_escape.append(True)
        decoded.append(_unescape(match))
        length += 1
        at = match.end()
    if at < len(content):
        seg_decoded.append(length)
        seg_raw.append(start + at)
        seg_escape.append(False)
        decoded.append(content[at:])
    return _Body(
        "".join(decoded),
        start,
        end,
        tuple(seg_decoded),
        tuple(seg_raw),
        tuple(seg_escape),
        quote,
    )


_COMMENT_MARKS = lazy_compile(r"/\*|\*/")


def _block_end(text: str, opened: int, nested: bool) -> int:
    """Where the block comment opened before `opened` ends (after its `*/`)."""
    if not nested:
        close = text.find("*/", opened)
        return len(text) if close < 0 else close + 2
    depth = 1
    for mark in _COMMENT_MARKS.finditer(text, opened):
        depth += 1 if mark.group() == "/*" else -1
        if not depth:
            return mark.end()
    return len(text)


@dataclass(frozen=True, slots=True)
class _Reading:
    """How a text is read for secrets, at every depth: its dialect, and what finds
    the secrets that are not SQL's own (`more`) after a cheap first look (`maybe`)."""

    dialect: _Dialect
    more: Callable[[str], list[Span]]
    maybe: Callable[[str], bool]


def _spans(text: str, reading: _Reading, depth: int) -> list[Span]:
    """Secrets in `text` read in the reading's dialect: the literals in a secret's
    place, what `more` finds (key=value, URLs, JSON), and both again inside
    literals and comments."""
    dialect = reading.dialect
    spans = reading.more(text) if depth else []  # (the whole text's: secret_spans asks once)
    # The last two tokens (comments aside), lowercased: a word, an operator, or
    # "" for a literal; and what the statement so far has said.
    last = before = ""
    fresh = True  # at a statement's start
    set_password = identified = False
    tokens, at, size = dialect.tokens, 0, len(text)
    while at < size:
        match = tokens.match(text, at)
        if match is None:  # only space was left
            break
        kind = match.lastgroup or "other"
        start, at = match.start(kind), match.end()
        if kind in _LITERALS:
            secret = (
                _SECRET_WORD.fullmatch(last) is not None
                or (last in ("=", "(") and _SECRET_WORD.fullmatch(before) is not None)
                or (identified and last in _AFTER_IDENTIFIED)
                or (set_password and last == "=")
            )
            if secret:
                spans.append(Span(start, at, MASK))
            elif match.end(kind) - start > 4:  # room for a secret's word inside
                body = _BODY[kind]
                spans.extend(
                    _inside(text, match.start(body), match.end(body), kind, reading, depth)
                )
            before, last = last, ""
        elif kind in ("line", "block", "exec"):
            if kind == "line":
                spans.extend(_inside(text, match.start("linebody"), at, "", reading, depth))
            elif kind == "block":
                end = _block_end(text, at, dialect.nested_comments)
                body_end = end - 2 if end - 2 >= at and text.startswith("*/", end - 2) else end
                spans.extend(_inside(text, at, body_end, "", reading, depth))
                at = end
            # (exec: MySQL's /*! … */ holds SQL, read on as such)
        elif kind == "word" or kind == "ident":
            word = match.group("identbody" if kind == "ident" else kind).lower()
            if word == "identified":
                identified = True
            elif word == "password" and last == "set" and fresh:
                set_password = True
            fresh = fresh and word == "set"
            before, last = last, word
        else:
            text_of = match.group(kind)
            if text_of == ";":
                fresh, set_password, identified = True, False, False
            else:
                fresh = False
            before, last = last, text_of
    return spans


def _inside(
    text: str, start: int, end: int, kind: str, reading: _Reading, depth: int
) -> list[Span]:
    """Secrets in a literal's or comment's content (`text[start:end]`, `kind` the
    literal's: its escapes), as raw spans of `text`."""
    raw = text[start:end]
    maybe = reading.maybe
    if depth >= MAX_DEPTH or not (maybe(raw) or ("\\" in raw and maybe(raw.replace("\\", "")))):
        return []
    quote = text[start - 1] if kind in ("e", "s", "q") else ""
    body = _body(text, start, end, reading.dialect.escapes.get(kind), quote)
    found = _spans(body.text, reading, depth + 1)
    return [
        Span(body.raw(span.start), body.raw(span.end), body.encode(span.mask)) for span in found
    ]


def secret_spans(
    text: str, more: Callable[[str], list[Span]], maybe: Callable[[str], bool]
) -> list[Span]:
    """Where `text` (SQL, or anything that may hold some) keeps secrets, read as
    PostgreSQL and as MySQL would: non-overlapping spans in order, each with the
    text that replaces it. `more` finds the secrets that are not SQL's own (it is
    asked of every literal's content too); `maybe` is its cheap first look."""
    spans = more(text)
    for dialect in DIALECTS if _MYSQL_READS_OTHERWISE.search(text) else (_PG,):
        spans += _spans(text, _Reading(dialect, more, maybe), 0)
    return merge(spans)


# Where MySQL's reading of a text can differ from PostgreSQL's: backslashes,
# double quotes, `#` and `-- ` comments, /*! … */ (and $$, /* /* */ */ the other way).
_MYSQL_READS_OTHERWISE = lazy_compile(r"""[\\"#`$]|/\*|--""")


def merge(spans: list[Span]) -> list[Span]:
    """`spans` in order, each overlap made one span (the widest one's mask)."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if span.start >= span.end:
            continue
        if merged and span.start < merged[-1].end:
            if span.end > merged[-1].end:
                merged[-1] = Span(merged[-1].start, span.end, merged[-1].mask)
            continue
        merged.append(span)
    return merged
