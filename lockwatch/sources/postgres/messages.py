"""What PostgreSQL says when a lock stops a statement, and what its docs advise:
lock timeouts, NOWAIT refusals, deadlocks with their pids, and the statement
timeout that is not a lock at all. Pure: text in, clues out (`lockwatch why`).
"""

from __future__ import annotations

import re

from lockwatch.model.clues import Clue, ClueKind
from lockwatch.model.lazyre import lazy_compile

SOURCE = "postgres"
TOOL = "postgres"

LOCK_TIMEOUT_ADVICE = (
    "PostgreSQL gave up after lock_timeout; its blocker may still hold the lock:"
    " end or finish the blocker's transaction, or retry"
)
DEADLOCK_ADVICE = (
    "PostgreSQL already broke the deadlock by aborting one transaction: retry it;"
    " to avoid it, take locks in one consistent order (PostgreSQL docs, 13.3.4)"
)
NOWAIT_ADVICE = "NOWAIT (or SKIP LOCKED's peer) refused at once: another session holds it"
STATEMENT_TIMEOUT_ADVICE = (
    "a statement timeout is not a lock: the statement ran longer than statement_timeout"
    " (if it waited on a lock, pg_stat_activity showed wait_event_type Lock)"
)

_LOCK_TIMEOUT = lazy_compile(r"canceling statement due to lock timeout|\block timeout\b", re.I)
_STATEMENT_TIMEOUT = lazy_compile(r"canceling statement due to statement timeout", re.I)
_DEADLOCK = lazy_compile(r"deadlock detected", re.I)
# "could not obtain lock on relation "jobs"", "... on row in relation "jobs""
_NOWAIT = lazy_compile(r'could not obtain lock on (?:row in )?relation "(?P<rel>[^"]+)"', re.I)
# CONTEXT:  while updating tuple (0,1) in relation "jobs"
_CONTEXT_RELATION = lazy_compile(r'in relation "(?P<rel>[^"]+)"', re.I)
# "relation jobs" / "on relation 16384 of database 5"
_ANY_RELATION = lazy_compile(r'\brelation "?(?P<rel>[A-Za-z_][\w.$]*)"?', re.I)
# The failed statement, as psql -b (--echo-errors) and the server's log give it
# (STATEMENT:  UPDATE jobs SET ...), and the tables it names.
_STATEMENT = lazy_compile(r"^\s*STATEMENT:\s+(?P<sql>.+)$", re.M)
_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_STATEMENT_TABLE = lazy_compile(
    rf"\b(?:TABLE|FROM|INTO|UPDATE|JOIN)\s+(?:ONLY\s+)?(?:IF\s+EXISTS\s+)?"
    rf"(?P<rel>{_IDENT}(?:\s*\.\s*{_IDENT})?)",
    re.I,
)
# DETAIL:  Process 8525 waits for ShareLock on transaction 740; blocked by process 8527.
_PROCESS = lazy_compile(r"\b[Pp]rocess (?P<pid>\d+)\b")
# pg's own id-like hints in logs: "PID 8525", "pid=8525"
_LOG_PID = lazy_compile(r"\b(?:PID|pid)[ =:](?P<pid>\d+)\b")


def _statement_tables(text: str) -> list[str]:
    """The tables the failed statement names (`"Odd"."t"` as Odd.t)."""
    found = []
    for statement in _STATEMENT.finditer(text):
        for match in _STATEMENT_TABLE.finditer(statement.group("sql")):
            parts = re.findall(_IDENT, match.group("rel"))
            found.append(".".join(p[1:-1].replace('""', '"') if p[0] == '"' else p for p in parts))
    return found


def clues(text: str) -> list[Clue]:
    """What `text` (a PostgreSQL error, with its DETAIL and CONTEXT) names."""
    statement_timeout = bool(_STATEMENT_TIMEOUT.search(text))
    lock_timeout = bool(_LOCK_TIMEOUT.search(text))
    deadlock = bool(_DEADLOCK.search(text))
    nowait = list(_NOWAIT.finditer(text))
    if not (lock_timeout or deadlock or nowait or statement_timeout):
        return []
    every_row = (("pg_all", True),)
    found: list[Clue] = []
    if statement_timeout and not (lock_timeout or deadlock or nowait):
        return [
            Clue(ClueKind.NOT_A_LOCK, "statement_timeout", SOURCE, TOOL, STATEMENT_TIMEOUT_ADVICE)
        ]
    advice = (
        DEADLOCK_ADVICE
        if deadlock
        else NOWAIT_ADVICE
        if nowait and not lock_timeout
        else LOCK_TIMEOUT_ADVICE
    )
    pids = [m.group("pid") for m in _PROCESS.finditer(text)]
    if deadlock or pids:
        pids += [m.group("pid") for m in _LOG_PID.finditer(text)]
    for pid in dict.fromkeys(pids):
        found.append(Clue(ClueKind.PID, pid, SOURCE, TOOL, advice, options=every_row))
    relations = [m.group("rel") for m in nowait]
    relations += [m.group("rel") for m in _CONTEXT_RELATION.finditer(text)]
    relations += _statement_tables(text)
    if not relations:
        relations += [m.group("rel") for m in _ANY_RELATION.finditer(text)]
    for relation in dict.fromkeys(relations):
        found.append(Clue(ClueKind.NAME, relation, SOURCE, TOOL, advice, options=every_row))
    hint = "deadlock" if deadlock else "lock_timeout" if lock_timeout else "nowait"
    found.append(Clue(ClueKind.HINT, hint, SOURCE, TOOL, advice))
    return found
