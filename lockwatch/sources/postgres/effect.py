"""What ending a session does, in words: its transaction, every lock it holds,
and every session of its blocking tree, those that proceed and those that still
wait (directly behind it or further down the chain), each by name.

Pure: it reads the server's locks in view (`peers`) as the blocking trees do
(`lockwatch.model.blocking`): each waiting session and whom it waits on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from lockwatch.model.lock import Lock
from lockwatch.sources.postgres.display import session_name
from lockwatch.sources.postgres.facts import PgBackend, PgLock

# Sessions named in one list of an effect; the rest are counted. Ten is a chain
# one can read in a dialog; past that, the Contention view has them all.
NAMED = 10


def _graph(
    pid: int, pg: PgLock, peers: Sequence[Lock]
) -> tuple[dict[int, set[int | str]], dict[int, PgBackend]]:
    """Whom each waiting session of `pg`'s server waits on, and each session's
    backend (for its name)."""
    waits_on: dict[int, set[int | str]] = {}
    backends: dict[int, PgBackend] = {}
    for peer in peers:
        facts = peer.facts
        if not isinstance(facts, PgLock) or facts.server != pg.server:
            continue
        backend = facts.backend
        if backend.pid is None:
            continue
        backends.setdefault(backend.pid, backend)
        if not facts.granted:
            blockers = waits_on.setdefault(backend.pid, set())
            blockers.update(p for p in facts.blocked_by if p)
            blockers.update(f"prepared transaction {gid}" for gid in facts.blocked_by_prepared)
            if 0 in facts.blocked_by and not facts.blocked_by_prepared:
                blockers.add("a prepared transaction")
    # Its waiters as pg_blocking_pids named them, even those whose rows are not in view.
    for waiter in pg.blocking:
        if waiter and waiter != pid:
            waits_on.setdefault(waiter, set()).add(pid)
    return waits_on, backends


def _named(pid: int, backends: dict[int, PgBackend]) -> str:
    """`5101 (billing-worker)`: a session's pid, and its application when it has one."""
    backend = backends.get(pid)
    name = None if backend is None or not backend.application else session_name(backend)
    return f"{pid} ({name})" if name else str(pid)


def _blocker(who: int | str) -> str:
    return f"pid {who}" if isinstance(who, int) else who


def who_proceeds(pid: int, pg: PgLock, peers: Sequence[Lock]) -> str:
    """Every session held up by `pid`, directly or down the chain, once it is
    gone: those that wait on nobody else proceed; the others still wait, each
    said with whom it waits on (one queued behind another waiter, which
    pg_blocking_pids names too, or further down the chain)."""
    waits_on, backends = _graph(pid, pg, peers)
    waiters: dict[int | str, set[int]] = {}
    for waiter, blockers in waits_on.items():
        for blocker in blockers:
            waiters.setdefault(blocker, set()).add(waiter)
    # Breadth first: those behind it directly, then those behind them.
    order: list[int] = []
    seen = {pid}
    queue: deque[int] = deque([pid])
    while queue:
        for waiter in sorted(waiters.get(queue.popleft(), ())):
            if waiter not in seen:
                seen.add(waiter)
                order.append(waiter)
                queue.append(waiter)
    if not order:
        return "nobody waits on it"
    go = [w for w in order if not waits_on.get(w, set()) - {pid}]
    stay = [w for w in order if waits_on.get(w, set()) - {pid}]
    said = []
    if len(go) == 1:
        said.append(f"waiter {_named(go[0], backends)} proceeds")
    elif go:
        shown = ", ".join(_named(w, backends) for w in go[:NAMED])
        more = f" and {len(go) - NAMED} more" if len(go) > NAMED else ""
        said.append(f"waiters {shown}{more} proceed")
    for waiter in stay[:NAMED]:
        on = ", ".join(_blocker(b) for b in sorted(waits_on[waiter] - {pid}, key=str))
        said.append(f"{_named(waiter, backends)} still waits (on {on})")
    if len(stay) > NAMED:
        said.append(f"{len(stay) - NAMED} more still wait")
    return "; ".join(said)


def session_effect(lock: Lock, peers: Sequence[Lock]) -> str:
    """What ending the holder's session does: its transaction, every lock it holds
    (as pg_locks counted them at the poll, not only the rows on screen), and every
    session of its blocking tree, those that proceed and those that still wait."""
    pg = lock.facts
    assert isinstance(pg, PgLock)
    pid = pg.backend.pid
    parts = []
    if pg.backend.state in ("idle in transaction", "idle in transaction (aborted)"):
        parts.append("rolls back its open transaction")
    elif pg.backend.xact_start is not None:
        parts.append("ends its transaction (rolled back)")
    else:
        parts.append("ends its session")
    held = pg.backend.held
    if held:
        total = sum(count for _, count in held)
        kinds = ", ".join(f"{count} {locktype}" for locktype, count in held)
        parts.append(f"releases all {total} lock{'s' if total != 1 else ''} it holds ({kinds})")
    else:
        count = sum(
            1
            for peer in peers
            if isinstance(peer.facts, PgLock)
            and peer.facts.server == pg.server
            and peer.facts.backend.pid == pid
            and peer.facts.granted
        ) or (1 if pg.granted else 0)
        parts.append(f"releases its {count} lock{'s' if count != 1 else ''}")
    if pid is not None:
        parts.append(who_proceeds(pid, pg, peers))
    return ", ".join(parts)
