"""What `lockwatch why` recognises in kazoo's and Curator's messages: the lock
path a timeout names.

- kazoo (`kazoo/recipe/lock.py`): `LockTimeout: Failed to acquire lock on
  /path after 5 seconds`, and `Failed to acquire semaphore on /path after ...`.
  A `Semaphore` queues its callers with a `Lock` at `/path-__lock__`: one that
  times out in that queue raises the Lock's message naming the queue, which is
  the semaphore `/path`'s.
- Curator (`InterProcessMutex.release`): `IllegalMonitorStateException: You do
  not own the lock: /path`; its `acquire(time, unit)` returns false and says
  nothing, so its users' "Could not acquire the lock" names no path: a hint.
"""

from __future__ import annotations

from collections.abc import Sequence

from lockwatch.model.clues import Clue, ClueKind
from lockwatch.model.lazyre import lazy_compile
from lockwatch.sources.zookeeper.ids import SEMAPHORE_QUEUE

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
        found.append(_kazoo(match["path"], match[1] == "semaphore"))
    for match in _CURATOR.finditer(text):
        found.append(_named(match["path"], "Curator"))
    if not found and _HINT.search(text):
        found.append(Clue(ClueKind.HINT, "lock_timeout", SOURCE, "Curator", ADVICE))
    return found


def _kazoo(path: str, semaphore: bool) -> Clue:
    if not semaphore and not path.endswith(SEMAPHORE_QUEUE):
        return _named(path, "kazoo")
    # A semaphore and its queue are read together: the queue waits on the leases.
    named = path.removesuffix(SEMAPHORE_QUEUE)
    return _named(named, "kazoo", (named, named + SEMAPHORE_QUEUE))


def _named(path: str, tool: str, paths: tuple[str, ...] = ()) -> Clue:
    # The lock path's own queue is read, not the whole tree.
    options = (("zk_paths", paths or (path,)),)
    return Clue(ClueKind.NAME, path, SOURCE, tool, ADVICE, options=options)
