"""What MySQL and MariaDB say when a lock stops a statement, and what their docs
advise: lock wait timeouts (1205), deadlocks (1213), NOWAIT refusals (3572),
and the GET_LOCK names a statement asks for. Pure: text in, clues out
(`lockwatch why`).
"""

from __future__ import annotations

import re

from lockwatch.model.clues import Clue, ClueKind
from lockwatch.model.lazyre import lazy_compile

SOURCE = "mysql"
TOOL = "mysql"

LOCK_WAIT_ADVICE = (
    "InnoDB gave up after innodb_lock_wait_timeout and rolled back the statement (not"
    " the transaction, unless innodb_rollback_on_timeout): its blocker may still hold"
    " the lock: finish or end the blocker's transaction, or retry"
)
DEADLOCK_ADVICE = (
    "InnoDB already broke the deadlock by rolling back one transaction: retry it;"
    " SHOW ENGINE INNODB STATUS (LATEST DETECTED DEADLOCK) shows both sides"
)
NOWAIT_ADVICE = "NOWAIT refused at once: another session holds the row or table"
GET_LOCK_ADVICE = (
    "a named lock is held by its session until RELEASE_LOCK or the session ends:"
    " IS_USED_LOCK(name) names its connection"
)

# ERROR 1205 (HY000): Lock wait timeout exceeded; try restarting transaction
# PyMySQL: (1205, 'Lock wait timeout exceeded; try restarting transaction')
_LOCK_WAIT = lazy_compile(r"\b1205\b|Lock wait timeout exceeded", re.I)
# ERROR 1213 (40001): Deadlock found when trying to get lock; try restarting transaction
_DEADLOCK = lazy_compile(r"\b1213\b|Deadlock found when trying to get lock", re.I)
# ERROR 3572 (HY000): Statement aborted because lock(s) could not be acquired
# immediately and NOWAIT is set.
_NOWAIT = lazy_compile(r"\b3572\b|could not be acquired immediately and NOWAIT", re.I)
# GET_LOCK('name', 10), IS_USED_LOCK('name'), IS_FREE_LOCK("name"): only a cheap
# look for a call; its name is read by the lexer (a call in a comment or string is none).
_CALL = lazy_compile(r"\b(?:GET_LOCK|IS_USED_LOCK|IS_FREE_LOCK|RELEASE_LOCK)\s*\(", re.I)
# The statement that failed, as the mysql/mariadb client echoes it between lines of
# dashes in batch mode, or as pasted from a prompt (`MariaDB [app]> `, `mysql> `).
_BREAK = lazy_compile(r"^\s*(?:-{3,}\s*)?$")
_PROMPT = lazy_compile(r"^\s*(?:MariaDB \[[^\]]*\]|mysql|MySQL \[[^\]]*\])>\s*")
_STATEMENT = lazy_compile(
    r"^(?:SELECT|UPDATE|DELETE|INSERT|REPLACE|LOCK\s+TABLES?|ALTER|DROP|TRUNCATE|RENAME"
    r"|CREATE|OPTIMIZE)\b",
    re.I,
)
# The row a statement picks: its first `column = literal` after WHERE.
_ROW = lazy_compile(
    r"\bWHERE\s+(?:.*?\bAND\s+)??(?:`?\w+`?\s*\.\s*)?`?(?P<column>\w+)`?\s*=\s*"
    r"(?:'(?P<single>(?:[^'\\]|\\.|'')*)'|\"(?P<double>(?:[^\"\\]|\\.|\"\")*)\"|(?P<number>-?\d+(?:\.\d+)?))",
    re.I | re.S,
)
# The messages are MySQL's only with one of these around them (1205 alone is a number).
_MYSQL_WORDS = lazy_compile(
    r"\bERROR\b|HY000|40001|Lock wait|Deadlock found|NOWAIT|\(1\d{3},", re.I
)


def _unquote(match: re.Match[str]) -> str:
    if match.group("single") is not None:
        raw = match.group("single").replace("''", "'")
    else:
        raw = match.group("double").replace('""', '"')
    return re.sub(r"\\(.)", r"\1", raw)


def statements(text: str) -> list[str]:
    """The SQL statements in `text`: its paragraphs (between blank lines or the
    client's lines of dashes) that begin as one, prompts taken off."""
    found: list[str] = []
    lines: list[str] = []
    for line in [*text.splitlines(), ""]:
        if not _BREAK.match(line):
            lines.append(_PROMPT.sub("", line))
            continue
        # Joined by newlines: a `-- ` or `#` comment ends at its line's end.
        paragraph = "\n".join(part.strip() for part in lines).strip()
        lines = []
        if _STATEMENT.match(paragraph):
            found.append(paragraph)
    return found


def _row(statement: str) -> tuple[str, str] | None:
    """The row a statement's WHERE picks, in words and as its key's value."""
    match = _ROW.search(statement)
    if match is None:
        return None
    if match.group("number") is not None:
        value = match.group("number")
        return f"{match.group('column')}={value}", value
    value = _unquote(match)
    return f"{match.group('column')}='{value}'", value


def _table_clues(text: str, advice: str | None) -> list[Clue]:
    """A clue for each table a failed statement in `text` names, with the row its
    WHERE picks: InnoDB's lock on that row is the one it waited for."""
    # The records module (and what it loads) only when a statement is there to read.
    from lockwatch.sources.mysql.records import tables_in

    found = []
    for statement in statements(text):
        row = _row(statement)
        said = (("row", row[0]), ("key", row[1])) if row is not None else ()
        for table in tables_in(statement):
            detail = (("is", "table"), *said)
            found.append(Clue(ClueKind.NAME, table, SOURCE, TOOL, advice, detail=detail))
    return found


def _lock_names(text: str) -> list[str]:
    """The lock names `text`'s GET_LOCK-family calls give, read by MySQL's lexer:
    in each statement the text holds, else in the whole text, else from each call
    to its line's end (prose around a call may hold a lone quote)."""
    if not _CALL.search(text):
        return []
    # The lexer only when a call is there to read (why's start-up stays small).
    from lockwatch.sources.mysql.lexer import named_locks, tokens

    parts = statements(text)
    if not parts:
        try:
            tokens(text)
            parts = [text]
        except ValueError:  # a lone quote in prose: each call, to its line's end
            parts = [text[m.start() :].partition("\n")[0] for m in _CALL.finditer(text)]
    return list(dict.fromkeys(name for part in parts for name in named_locks(part)))


def clues(text: str) -> list[Clue]:
    """What `text` (a MySQL/MariaDB error, or a statement with GET_LOCK) names."""
    found: list[Clue] = []
    for name in _lock_names(text):
        found.append(
            Clue(
                ClueKind.NAME,
                name,
                SOURCE,
                TOOL,
                GET_LOCK_ADVICE,
                # MariaDB without metadata_lock_info is asked about the name itself.
                options=(("mysql_locks", (name,)),),
                detail=(("is", "lock"),),
            )
        )
    if not _MYSQL_WORDS.search(text):
        return found
    hint = None
    if _DEADLOCK.search(text):
        hint = Clue(ClueKind.HINT, "deadlock", SOURCE, TOOL, DEADLOCK_ADVICE)
    elif _LOCK_WAIT.search(text):
        hint = Clue(ClueKind.HINT, "lock_wait_timeout", SOURCE, TOOL, LOCK_WAIT_ADVICE)
    elif _NOWAIT.search(text):
        hint = Clue(ClueKind.HINT, "nowait", SOURCE, TOOL, NOWAIT_ADVICE)
    if hint is None:
        return found
    # A statement's tables are looked up only beside a lock error about it.
    return [*found, *_table_clues(text, hint.advice), hint]
