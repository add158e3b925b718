"""Which named lock a waiting statement asks for, read as MySQL's lexer reads it.

A session in PROCESSLIST's `User lock` state waits in GET_LOCK, and only its
statement says for which name. Read with a pattern, a comment (`/* GET_LOCK('x',
1) */`) or a string (`'GET_LOCK(...)'`) was taken for the call, and a name's
escapes (`\\n`, `\\0`) were read as letters: the waiter was put behind an
innocent holder. Here the statement is tokenised as MySQL does (comments `/* */`,
`-- `, `#`; executable comments `/*! */`; strings in either quote, doubled quotes,
backslash escapes, adjacent strings joined; backquoted identifiers), and a call
counts only where its first argument is a plain string literal. Where that cannot
tell the name (a variable, an expression, a hex or charset-introduced literal, a
versioned executable comment, several calls, no call at all), the answer says
why, for the waiter to be `unknown`, never put behind a guess.

Pure: text in, names out.
"""

from __future__ import annotations

from dataclasses import dataclass

from lockwatch.model.lazyre import lazy_compile

# MySQL's backslash escapes in a string (anything else: the character itself).
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_WORD = lazy_compile(r"[A-Za-z0-9_$\x80-\uffff]+")
_VERSIONED = lazy_compile(r"(?:M?!)(\d{5,6})?")

WORD, STRING, IDENT, PUNCT = "word", "string", "ident", "punct"


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # WORD, STRING, IDENT (backquoted) or PUNCT
    text: str  # a string's value
    versioned: bool = False  # inside /*!NNNNN */: runs only on some server versions


@dataclass(frozen=True, slots=True)
class Asked:
    """The names of one statement's GET_LOCK calls, in order, or why no name can
    be told (`why`)."""

    calls: tuple[str, ...] = ()
    why: str | None = None


def _string(text: str, at: int, escapes: bool) -> tuple[Token, int]:
    """The string literal opening at `at` (its quote), and where it ends.
    `escapes` False: sql_mode NO_BACKSLASH_ESCAPES (a backslash is itself)."""
    quote, out, i = text[at], [], at + 1
    while i < len(text):
        char = text[i]
        if escapes and char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            # `\%` and `\_` keep their backslash (they are LIKE's escapes).
            out.append(f"\\{nxt}" if nxt in "%_" else _ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if char == quote:
            if text[i + 1 : i + 2] == quote:  # a doubled quote is one quote
                out.append(quote)
                i += 2
                continue
            return Token(STRING, "".join(out)), i + 1
        out.append(char)
        i += 1
    raise ValueError("a string literal is not closed")


def _comment_end(text: str, at: int) -> int:
    """Where the comment opening at `at` ends (-1: it is not a comment)."""
    if text.startswith("/*", at):
        end = text.find("*/", at + 2)
        return len(text) if end < 0 else end + 2
    dashes = text.startswith("--", at) and (at + 2 == len(text) or text[at + 2] in " \t\r\n\f\v")
    if dashes or text[at] == "#":
        end = text.find("\n", at)
        return len(text) if end < 0 else end + 1
    return -1


def tokens(text: str, escapes: bool = True) -> list[Token]:
    """`text` as MySQL's lexer splits it, comments left out (an executable
    comment's inside kept, marked `versioned` where it names a version);
    `escapes` False: as under sql_mode NO_BACKSLASH_ESCAPES.
    Raises ValueError for a string or quoted identifier left open."""
    found: list[Token] = []
    i, versioned, close = 0, False, -1
    while i < len(text):
        char = text[i]
        if i == close:
            versioned, close, i = False, -1, i + 2
            continue
        if char.isspace():
            i += 1
            continue
        executable = _VERSIONED.match(text, i + 2) if text.startswith("/*", i) else None
        if executable is not None and close < 0:
            versioned = executable.group(1) is not None or text[i + 2] == "M"
            end = text.find("*/", executable.end())
            close = len(text) if end < 0 else end
            i = executable.end()
            continue
        end = _comment_end(text, i)
        if end >= 0:
            i = end
            continue
        if char in "'\"":
            token, i = _string(text, i, escapes)
            found.append(Token(token.kind, token.text, versioned))
            continue
        if char == "`":
            end = text.find("`", i + 1)
            while end >= 0 and text[end + 1 : end + 2] == "`":
                end = text.find("`", end + 2)
            if end < 0:
                raise ValueError("a quoted identifier is not closed")
            found.append(Token(IDENT, text[i + 1 : end].replace("``", "`"), versioned=versioned))
            i = end + 1
            continue
        word = _WORD.match(text, i)
        if word is not None:
            found.append(Token(WORD, word.group(0), versioned=versioned))
            i = word.end()
            continue
        found.append(Token(PUNCT, char, versioned=versioned))
        i += 1
    return found


def _first_argument(found: list[Token], at: int) -> str | None:
    """The name a call's first argument gives (the tokens after its `(` at
    `at`): string literals alone, adjacent ones joined, then `,` or `)`; None
    for anything else."""
    parts: list[Token] = []
    i = at + 1
    while i < len(found) and found[i].kind == STRING:
        parts.append(found[i])
        i += 1
    after = found[i] if i < len(found) else None
    if not parts or after is None or after.kind != PUNCT or after.text not in ",)":
        return None
    return "".join(p.text for p in parts)


_NOT_LITERAL = (
    "its name is not a plain string literal (a variable, an expression, a hex or"
    " charset-introduced literal)"
)


def get_lock_calls(statement: str, escapes: bool = True) -> Asked:
    """Every GET_LOCK call in `statement` with the name it asks for (`escapes`
    False: as read under sql_mode NO_BACKSLASH_ESCAPES)."""
    try:
        found = tokens(statement, escapes)
    except ValueError as exc:
        return Asked(why=f"its statement cannot be read: {exc} (cut short?)")
    calls: list[str] = []
    for i, token in enumerate(found):
        if token.kind != WORD or token.text.upper() != "GET_LOCK":
            continue
        if i + 1 >= len(found) or found[i + 1].text != "(" or found[i + 1].kind != PUNCT:
            continue
        if i > 0 and found[i - 1].kind == PUNCT and found[i - 1].text == ".":
            continue  # db.get_lock(…): a stored function of that name, not the server's
        if token.versioned:
            return Asked(why="its GET_LOCK is in a versioned comment (/*!NNNNN … */)")
        name = _first_argument(found, i + 1)
        if name is None:
            return Asked(why=_NOT_LITERAL)
        calls.append(name)
    if not calls:
        return Asked(why="its statement has no GET_LOCK call (a stored routine's, or cut short)")
    return Asked(tuple(calls))


def waited_name(statement: str | None, held: dict[str, int], thread: int) -> str | Asked:
    """The one name a session in `User lock` waits for: its statement's GET_LOCK
    name that `thread` does not hold already (GET_LOCK on a name its own session
    holds returns at once); `held` is every held name's holder. A name with a
    backslash reads two ways (sql_mode NO_BACKSLASH_ESCAPES or not, which
    PROCESSLIST does not show): the reading a holder has is taken, and where
    both or neither have one, the usual one (escapes). Otherwise why not (`Asked`)."""
    if not statement:
        return Asked(why="its statement is not shown")
    readings = [get_lock_calls(statement)]
    if "\\" in statement:
        readings.append(get_lock_calls(statement, escapes=False))
    chosen = next((r for r in readings if any(n in held for n in r.calls)), readings[0])
    if chosen.why is not None:
        return chosen
    open_ = list(dict.fromkeys(n for n in chosen.calls if held.get(n) != thread))
    if len(open_) != 1:
        names = ", ".join(repr(name) for name in chosen.calls[:4])
        return Asked(
            why=f"its statement asks GET_LOCK for {names}: which of them it waits for"
            " cannot be told"
        )
    return open_[0]


def asked_names(statement: str | None) -> list[str]:
    """Every name a statement's GET_LOCK calls could ask for, in either reading
    of its backslashes: the names to ask IS_USED_LOCK about."""
    if not statement:
        return []
    readings = [get_lock_calls(statement)]
    if "\\" in statement:
        readings.append(get_lock_calls(statement, escapes=False))
    return list(dict.fromkeys(name for reading in readings for name in reading.calls))


# The functions whose first argument names a lock (`lockwatch why` reads them all).
_NAMING = frozenset({"GET_LOCK", "IS_USED_LOCK", "IS_FREE_LOCK", "RELEASE_LOCK"})


def _named_in(text: str, escapes: bool) -> list[str]:
    """The literal names `text`'s lock-naming calls give, in order (none when it
    cannot be tokenised)."""
    try:
        found = tokens(text, escapes)
    except ValueError:
        return []
    names = []
    for i, token in enumerate(found[:-1]):
        call = found[i + 1]
        if token.kind != WORD or token.text.upper() not in _NAMING:
            continue
        if call.kind != PUNCT or call.text != "(":
            continue
        if i > 0 and found[i - 1].kind == PUNCT and found[i - 1].text == ".":
            continue  # db.get_lock(…): a stored function, not the server's
        name = _first_argument(found, i + 1)
        if name is not None:
            names.append(name)
    return names


def named_locks(text: str) -> list[str]:
    """Every lock name the GET_LOCK, IS_USED_LOCK, IS_FREE_LOCK and RELEASE_LOCK
    calls in `text` (a statement, or a line of prose around one) give as a plain
    string literal, in either reading of its backslashes: a call in a comment or
    a string is none."""
    names = _named_in(text, escapes=True)
    if "\\" in text:
        names += _named_in(text, escapes=False)
    return list(dict.fromkeys(names))
