"""From what the operator pointed at to a plan: one path for the CLI and the
dashboard's action session.

`find` turns a TARGET (a path, or a lock id of any source) into the lock as it
is now; `prepare` works out the plan, after the checks every front end shares
(which actions the lock's source offers, the watched roots, whose sessions may
be touched).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from lockwatch.actions import files
from lockwatch.actions.plan import Kind, Plan, plan, refused
from lockwatch.model.handover import NewHolder
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.sources.contract import Found, Wanted
from lockwatch.sources.files.plugin import SOURCE as FILES
from lockwatch.sources.registry import by_name, for_id


def find(target: str, wanted: Wanted, host: str) -> Found | str:
    """The lock TARGET names, judged now; or why there is none (a message).
    Raises SourceError (the TARGET is malformed) or LookupFailed (the source
    could not be asked)."""
    source = for_id(target) or FILES
    return source.find(target, wanted, host)


def unseen_id(target: str) -> str:
    """The id a TARGET that named no lock is audited under."""
    if for_id(target) is not None and not target.startswith("file:"):
        return target
    return "file:" + os.path.abspath(target.removeprefix("file:"))


def prepare(
    kind: Kind,
    lock: Lock,
    verdict: Verdict,
    *,
    peers: Sequence[Lock] = (),
    new_holder: NewHolder | None = None,
    tombstone_dir: str | None = None,
    held: bool = False,
    held_elsewhere: bool = False,
    roots: Sequence[str] | None = None,
    pg_applications: str | None = None,
    signal: str = "TERM",
) -> Plan:
    """The plan for `kind` on `lock`. `roots`: act only on lock files under these
    (the dashboard's watched trees); `pg_applications`: act only on Postgres
    sessions whose application_name starts with it (the demo on a shared server)."""
    if lock.remote is not None:
        from lockwatch.sources.remote.document import advice

        return refused(kind, lock, verdict, "remote", advice(kind.value, lock, lock.remote))
    source = by_name(lock.source)
    if source is not None and kind.value not in source.actions:
        offered = ", ".join(sorted(source.actions)) or "none"
        return refused(
            kind,
            lock,
            verdict,
            "unsupported",
            f"{lock.source} locks offer {offered}, not {kind.value}",
        )
    if (
        roots is not None
        and lock.source == "file"
        and lock.path is not None
        and not files.inside(lock.path, roots)
    ):
        return refused(
            kind, lock, verdict, "outside_roots", f"{lock.path} is outside the watched roots"
        )
    if (
        pg_applications is not None
        and lock.pg is not None
        and not held
        and not (lock.pg.backend.application or "").startswith(pg_applications)
    ):
        return refused(
            kind,
            lock,
            verdict,
            "not_ours",
            f"only the demo's own sessions ({pg_applications}…) can be acted on"
            " here; this one belongs to someone else",
        )
    return plan(
        kind,
        lock,
        verdict,
        peers=peers,
        new_holder=new_holder,
        tombstone_dir=tombstone_dir,
        held=held,
        held_elsewhere=held_elsewhere,
        signal=signal,
    )
