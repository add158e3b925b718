"""What `lockwatch why` recognised in the text an operator pasted: a path, a
lock id, a pid, a lock's name, a server's hint ("lock wait timeout"), with the
tool whose message it is and what that tool's own docs advise.

Each source says what it recognises (`Source.clues`, sources/contract.py); the
patterns live in its package. A clue only says what to look at: the verdict is
always the one `ls` gives the lock it leads to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from lockwatch.model.slots import lean_dataclass


class ClueKind(StrEnum):
    PATH = "path"  # a file: a lock file, or a file a lock is taken on
    ID = "id"  # a lock id as `ls --json` prints it
    PID = "pid"  # a process or server session the message names
    NAME = "name"  # a lock's name on a server (a relation, a GET_LOCK name)
    HINT = "hint"  # a server said it waited too long or deadlocked, naming no one
    TOOL_ID = "tool_id"  # the tool's own id of a lock (Terraform's Lock Info ID)
    NOT_A_LOCK = "not_a_lock"  # the message is about something else (a statement timeout)


@lean_dataclass(frozen=True, slots=True)
class Clue:
    kind: ClueKind
    value: str
    source: str  # the registry name of the source that recognised it
    tool: str | None = None  # whose message it is: "apt", "git", "postgres", ...
    # What the tool's own docs say to do, when the lock turns out free or stale.
    advice: str | None = None
    # The process the message names for a pid ("apt-get"), as it says it.
    command: str | None = None
    # For a path: whether it names a lock file (by what the source knows of
    # lock files' names and of the tools' messages); False: a file locks are
    # taken on (a database), said as such rather than judged as a lock file.
    lock_file: bool = True
    # CLI values the source wants set to look for this clue (its own options:
    # every row of a server, a GET_LOCK name to ask about), as (name, value).
    options: tuple[tuple[str, Any], ...] = ()
    # For a name: what the text says of it, in its source's own terms, for its
    # facts to match a lock by (`Facts.named_by`): what kind of thing it is (a
    # table, a named lock) and the row a statement picks, as (name, value).
    detail: tuple[tuple[str, str], ...] = ()

    def said(self, key: str) -> str | None:
        return dict(self.detail).get(key)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "value": self.value,
            "source": self.source,
            "tool": self.tool,
            "advice": self.advice,
            "command": self.command,
            "lock_file": self.lock_file if self.kind is ClueKind.PATH else None,
        }


class Sureness(StrEnum):
    """How sure `why` is that a lock is the one the text is about."""

    CERTAIN = "certain"  # the text names it: its path, id, session, lock name, table and row
    LIKELY = "likely"  # the text names its table, not the row (another row may be it)
    POSSIBLE = "possible"  # it blocks others now; the text names nothing of it


@lean_dataclass(frozen=True, slots=True)
class Match:
    """How surely a clue leads to a lock, and what matched, in words."""

    sure: Sureness
    matched: str  # "table test.t, row id=1", "a root of the blocking trees now"

    @property
    def rank(self) -> int:
        return list(Sureness).index(self.sure)


def names_lock(name: str, wanted: str) -> bool:
    """Whether lock name `name` is of `wanted` (a relation `jobs` names
    `public.jobs` and `public.jobs (0,1)`, not `jobs_archive`)."""
    if name == wanted:
        return True
    return re.search(rf"(?:^|[.\s]){re.escape(wanted)}(?:$|[\s(])", name) is not None


def distinct(clues: Iterable[Clue]) -> list[Clue]:
    """`clues` in order, each (kind, value, source, detail) once: the first, which says most."""
    seen: set[tuple[ClueKind, str, str, tuple[tuple[str, str], ...]]] = set()
    out = []
    for clue in clues:
        key = (clue.kind, clue.value, clue.source, clue.detail)
        if key not in seen:
            seen.add(key)
            out.append(clue)
    return out
