"""Which statements on a lock table (or its tool's other table) show the tool at
work, whatever the server: only what the tool does while it holds the lock.

Anyone reads these tables — `knex migrate:status`, an operator's `select * from
knex_migrations_lock`, lockwatch itself — and a session that read one and idles
is no run at work. What a run holding the lock does is write: it takes the row
(`update … set is_locked = 1`, `select … for update`), records its migrations
(`insert into knex_migrations`), and knex reads its next batch number
(`select max("batch") as "max_batch"`) only once it holds the lock.
"""

from __future__ import annotations

import re
from functools import cache

from lockwatch.sources.locktables.facts import KNEX

# Leading comments and space (a driver's or a framework's tag), then the first word.
_FIRST_WORD = r"^(?:\s+|/\*.*?\*/|--[^\n]*(?:\n|$)|\#[^\n]*(?:\n|$))*\(*\s*(?P<word>\w+)"
# The words a statement that writes begins with.
_WRITES = frozenset({"update", "insert", "delete", "replace", "merge", "truncate", "alter", "drop"})
# A read that takes the row's lock (PostgreSQL's and MySQL's spellings).
_LOCKING_READ = r"\bfor\s+(?:no\s+key\s+)?(?:update|share)\b|\block\s+in\s+share\s+mode\b"
# knex's `_latestBatchNumber`, run in `_runBatch` after `_getLock` only.
_KNEX_BATCH = r"\bmax\s*\(\s*[\"`]?batch[\"`]?\s*\)\s+as\s+[\"`]?max_batch\b"


@cache
def _pattern(source: str) -> re.Pattern[str]:
    # Compiled on first use: most polls find no lock table at all.
    return re.compile(source, re.IGNORECASE | re.DOTALL)


def tool_statement(statement: str, tool: str) -> bool:
    """Whether `statement` (one that names the tool's table) is the tool's own work
    under its lock: a write, a read that locks rows, or knex's batch read."""
    first = _pattern(_FIRST_WORD).match(statement)
    if first is not None and first["word"].lower() in _WRITES:
        return True
    if _pattern(_LOCKING_READ).search(statement):
        return True
    return tool == KNEX and _pattern(_KNEX_BATCH).search(statement) is not None
