"""Breaking a lock row: what its tool's own unlock does (`knex migrate:unlock`,
`liquibase releaseLocks`), as a compare-and-swap UPDATE that matches the whole
row the operator saw. 0 rows updated: it changed since they looked, refused.

`WithTables` puts these in front of a server source's own actions: a lock whose
facts are a `TableLock` gets these, every other lock the source's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.action import ActionRefused, Done, Holding, Kind, Plan, refused
from lockwatch.model.facts import Row
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import ActionProvider, Wanted
from lockwatch.sources.locktables.facts import UNLOCK_COMMANDS, TableLock

if TYPE_CHECKING:
    from lockwatch.model.action import Asked, Doing

# (the server's reach, as the source's provider gives it; the facts) -> rows updated.
Unlocker = Callable[[Mapping[str, Any], TableLock], int]


def unlocker(reach_key: str, flag: str, unlock: Callable[[Any, TableLock], int]) -> Unlocker:
    """A source's Unlocker: the row's server found through the action's reach
    (`reach_key`: the source's lookup by server name), the row unlocked there by
    `unlock`; refused (`no_dsn`) where the operator named no such server (`flag`)."""

    def run(reach: Mapping[str, Any], facts: TableLock) -> int:
        find = reach.get(reach_key)
        server = find(facts.server) if find is not None else None
        if server is None:
            raise ActionRefused("no_dsn", f"no DSN for {facts.server}: name the server with {flag}")
        return unlock(server, facts)

    return run


def plan_break(kind: Kind, lock: Lock, verdict: Verdict) -> Plan:
    facts = lock.facts
    assert isinstance(facts, TableLock)
    if kind is not Kind.BREAK:
        why = f"a lock row can only be broken (its tool's unlock); {kind.value} does not apply"
        return refused(kind, lock, verdict, "unsupported", why)
    if not facts.unlock:
        why = f"no unlock is known for {facts.table}: set `unlocked` for it in [[locktables]]"
        return refused(kind, lock, verdict, "unsupported", why)
    if facts.version is None:
        # Its values alone cannot tell this run's lock from a new run's that took
        # it again meanwhile (is_locked 1 -> 0 -> 1): no break on them alone.
        why = (
            f"{facts.table}'s row version could not be read when it was looked at (a change"
            " within that second, or a recording): a new run that took it again since could"
            " not be told apart; look again"
        )
        return refused(kind, lock, verdict, "unversioned", why)
    sets = ", ".join(f"{column} = {value.upper()}" for column, value in facts.unlock)
    command = UNLOCK_COMMANDS.get(facts.tool)
    like = f" (what `{command}` does)" if command else ""
    effect = (
        f"UPDATE {facts.table} SET {sets} on {facts.server}{like}, only where the row is"
        f" still exactly as seen ({facts.version})"
    )
    stale = verdict.state is State.STALE
    doubt = None
    if verdict.state is State.UNKNOWN:
        doubt = f"{lock.name} may still be held: its tool could be at work from a client unseen"
    return Plan(kind, lock, verdict, "lock_broken", effect, needs_name=not stale, why_name=doubt)


def run_break(plan: Plan, doing: Doing, unlocker: Unlocker) -> Done:
    facts = plan.lock.facts
    assert isinstance(facts, TableLock)
    changed = unlocker(doing.reach, facts)
    if changed == 0:
        raise ActionRefused(
            "changed",
            f"{facts.table} on {facts.server} changed since you looked (no row matched what"
            f" you saw: its values and {facts.version}): nothing done",
        )
    return Done(
        {"table": facts.table, "rows": changed, "unlock": dict(facts.unlock)},
        f"unlocked {facts.table} on {facts.server} ({changed} row{'s' * (changed != 1)})",
    )


class WithTables:
    """A server source's actions, with lock rows' breaks in front of them."""

    def __init__(self, base: ActionProvider, unlocker: Unlocker) -> None:
        self._base = base
        self._unlocker = unlocker
        self.kinds = base.kinds | {Kind.BREAK}
        self.takes_paths = base.takes_paths
        self.name: str = getattr(base, "name", "")

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        return self._base.reach(wanted)

    def screen(self, kind: Kind, lock: Lock, verdict: Verdict) -> Plan | None:
        return None if _row(lock) else self._base.screen(kind, lock, verdict)

    def holding(self, lock: Lock, operator: str, pid: int | None) -> Holding:
        return Holding() if _row(lock) else self._base.holding(lock, operator, pid)

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        if _row(lock):
            return plan_break(kind, lock, verdict)
        return self._base.plan(kind, lock, verdict, asked)

    def run(self, plan: Plan, doing: Doing) -> Done:
        if _row(plan.lock):
            return run_break(plan, doing, self._unlocker)
        return self._base.run(plan, doing)

    def target(self, lock: Lock) -> dict[str, Any]:
        facts = lock.facts
        if isinstance(facts, TableLock):
            return {
                "server": facts.server,
                "database": facts.database,
                "table": facts.table,
                "tool": facts.tool,
                "row": facts.seen,
            }
        return self._base.target(lock)

    def unseen_id(self, target: str) -> str:
        return self._base.unseen_id(target)

    def unseen_target(self, lock_id: str) -> dict[str, Any]:
        return self._base.unseen_target(lock_id)

    def moved_aside(self, path: str, tombstone_dir: str | None) -> bool:
        return self._base.moved_aside(path, tombstone_dir)

    def seen_hash(self, lock: Lock) -> str | None:
        facts = lock.facts
        if isinstance(facts, TableLock):
            import hashlib

            return hashlib.sha256(facts.row.encode()).hexdigest()
        return self._base.seen_hash(lock)

    def where(self, lock: Lock) -> str | None:
        facts = lock.facts
        if isinstance(facts, TableLock):
            return f"{facts.server} {facts.table}"
        return self._base.where(lock)

    def confirm_rows(self, lock: Lock, verdict: Verdict, now: datetime) -> Sequence[Row]:
        facts = lock.facts
        if isinstance(facts, TableLock):
            rows: list[Row] = [("row", ", ".join(f"{k}={v}" for k, v in facts.seen.items()))]
            if facts.holder_text(lock):
                rows.append(("holder", facts.holder_text(lock) or ""))
            return rows
        return self._base.confirm_rows(lock, verdict, now)

    def choices(self, kind: Kind, lock: Lock) -> Any:
        # Rows are broken one way; the source's own locks as it offers them.
        choose = None if _row(lock) else getattr(self._base, "choices", None)
        return None if choose is None else choose(kind, lock)

    def rejudge(self, lock: Lock, clock: Any, host: str) -> Verdict:
        return self._base.rejudge(lock, clock, host)

    # Lock rows are never held by writing them, nor moved aside: the source's word.

    def tombstone_place(self, tombstone_dir: str | None) -> str | None:
        return self._base.tombstone_place(tombstone_dir)

    def refreshed(self, format: str, content: Any, now: datetime) -> bytes | None:
        return self._base.refreshed(format, content, now)

    def rewrite(self, path: str, expected_sha256: str, content: bytes, *, token: str) -> None:
        self._base.rewrite(path, expected_sha256, content, token=token)

    def reload(self, path: str) -> Lock | None:
        return self._base.reload(path)


def _row(lock: Lock) -> bool:
    return isinstance(lock.facts, TableLock)
