"""What `lockwatch why` recognises in kazoo's and Curator's messages: the lock
path a timeout names.

- kazoo (`kazoo/recipe/lock.py`): `LockTimeout: Failed to acquire lock on
  /path after 5 seconds`, and `Failed to acquire semaphore on /path after ...`.
- Curator (`InterProcessMutex.release`): `IllegalMonitorStateException: You do
  not own the lock: /path`; its `acquire(time, unit)` returns false and says
  nothing, so its users' "Could not acquire the lock" names no path: a hint.
"""

from __future__ import annotations

from collections.abc import Sequence

from lockwatch.model.clues import Clue, ClueKind
from lockwatch.model.lazyre import lazy_compile

SOURCE = "zookeeper"
ADVICE = (
    "see who holds it and whether its session still has a client: lockwatch ls --zk"
    " HOST:PORT --zk-path PATH"
)

_KAZOO = lazy_compile(r"Failed to acquire (lock|semaphore) on (?P<path>/\S*?) after \S+ seconds")
_CURATOR = lazy_compile(r"You do not own the lock: (?P<path>/\S+)")
_HINT = lazy_compile(r"(?i)could not acquire the lock|LockTimeout")


def clues(text: str) -> Sequence[Clue]:
    found: list[Clue] = []
    for match in _KAZOO.finditer(text):
        found.append(_named(match["path"], "kazoo"))
    for match in _CURATOR.finditer(text):
        found.append(_named(match["path"], "Curator"))
    if not found and _HINT.search(text):
        found.append(Clue(ClueKind.HINT, "lock_timeout", SOURCE, "Curator", ADVICE))
    return found


def _named(path: str, tool: str) -> Clue:
    # The lock path's own queue is read, not the whole tree.
    return Clue(ClueKind.NAME, path, SOURCE, tool, ADVICE, options=(("zk_paths", (path,)),))
