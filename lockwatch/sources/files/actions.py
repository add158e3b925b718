"""The file source's actions: break (the lock renamed into a tombstone
directory, never deleted), steal (a new lock written in its format for the
operator) and release (of a lock lockwatch wrote), each through the
compare-and-swap of sources/files/cas.py.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lockwatch.model.action import Asked, Doing, Done, Kind, Plan, decoded, refused
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import ActionsBase, Choices
from lockwatch.sources.files import ids
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.tombstones import TOMBSTONE_DIR

if TYPE_CHECKING:
    from datetime import datetime

    from lockwatch.clock import Clock
    from lockwatch.model.lock import Lock
    from lockwatch.sources.filelocks import HoldActions


# A tombstone directory is read this far for a lock's tombstone, no further.
_MAX_TOMBSTONES_LOOKED_AT = 10_000


def tombstone_place(tombstone_dir: str | None) -> str:
    """Where broken locks go, in words: the configured directory, or the default
    beside each lock."""
    where = tombstone_dir or TOMBSTONE_DIR
    return f"{where}/" if where.startswith("/") else f"{where}/ beside it"


def _tombstone(lock: Lock, tombstone_dir: str | None) -> str:
    assert lock.path is not None
    directory, _, name = lock.path.rpartition("/")
    where = tombstone_dir or TOMBSTONE_DIR
    if not where.startswith("/"):
        where = f"{directory}/{where}"
    return f"{where}/{name}@<UTC time of the action>"


def _refusal(lock: Lock) -> tuple[str, str] | None:
    if lock.path is None:
        return ("not_a_lock", "this lock has no file")
    codes = {reason.code for reason in lock.defects}
    if "symlink" in codes:
        return ("symlink", f"{lock.path} is a symlink; lockwatch never acts on a lock through one")
    if "not_regular_file" in codes:
        return ("not_regular_file", f"{lock.path} is not a regular file")
    if "too_large" in codes:
        return ("too_large", f"{lock.path} is too large to be a lock; look at it by hand")
    if facts_of(lock).unread is not None:
        # Its bytes were never read: no digest to compare right before a move.
        return (
            "permission_denied",
            f"lockwatch may not read {lock.path}, so it has nothing to compare right before"
            " moving it: it never moves it (run as the file's owner)",
        )
    return None


def _kernel_actions(asked: Asked) -> HoldActions | None:
    """The kernel source's actions, as the front end hands them over (no source
    imports another); None: not at hand."""
    from lockwatch.sources.filelocks import HoldActions

    actions = asked.providers("kernel") if asked.providers is not None else None
    return actions if isinstance(actions, HoldActions) else None


def _kernel_held(kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan | None:
    """A lock file a kernel lock is held on is never moved: its break signals the
    holder (the kernel's break), anything else is refused. None: no kernel lock."""
    from lockwatch.sources.filelocks import kernel_lock_id

    assert lock.path is not None
    evidence = facts_of(lock).evidence
    if evidence is not None and evidence.holds and kind is not Kind.CANCEL:
        hold = evidence.holds[0]
        if kind is Kind.BREAK and len(evidence.holds) == 1 and asked.given.get("signal"):
            # The file's row is its kernel lock's (one row per file): breaking it
            # is the kernel's break, signalling the processes that hold it.
            kernel = _kernel_actions(asked)
            if kernel is not None:
                return kernel.plan_hold(kind, hold, lock.path, verdict, asked)
            why = "the kernel source's actions, which signal its holders, are not at hand here"
            return refused(kind, lock, verdict, "unsupported", why)
        who = f"pid {hold.holder_pid}" if hold.holder_pid else "a process"
        several = len(evidence.holds) > 1
        ask = (
            f"; {len(evidence.holds)} kernel locks are held on it: break each by its id"
            if several
            else " (--signal TERM or KILL with this break)"
        )
        why = (
            f"{who} holds a kernel lock on {lock.path}: moving the file would let a second"
            f" holder in while it still holds the old one; signal the holder instead{ask}"
            f" (lockwatch break '{kernel_lock_id(hold)}')"
        )
        return refused(kind, lock, verdict, "kernel_lock", why)
    return None


def _steal(
    kind: Kind, lock: Lock, verdict: Verdict, asked: Asked, module: Any, stale: bool
) -> Plan:
    """A steal: the lock moved to a tombstone and a new one written in its format
    (`module`, its writer) for the operator."""
    from lockwatch.model.humanize import duration

    assert lock.path is not None
    tombstone_dir = asked.tombstone_dir
    if not stale:
        why = (
            "it is invalid; break it instead"
            if verdict.state is State.INVALID
            else "stealing a lock that is not stale is never allowed (lock spec §7.1)"
        )
        return refused(kind, lock, verdict, "not_stale", f"{lock.name} is {verdict.state}: {why}")
    new_holder = asked.new_holder
    content = (
        module.handover(lock.content, new_holder)
        if module is not None and new_holder is not None
        else None
    )
    if content is None or new_holder is None:
        why = (
            f"lockwatch cannot write {lock.name} ({lock.format}) for you: it records no"
            " holder to hand over; break it instead"
        )
        return refused(kind, lock, verdict, "unsupported", why)
    # Heartbeat formats record the writer's pid (informational); the others' liveness
    # is the pid: the operator's shell, or lockwatch itself.
    pid = new_holder.own_pid if facts_of(lock).policy.heartbeat else new_holder.pid
    terms = f"pid {pid} on {new_holder.host}"
    if lock.ttl_seconds is not None:
        terms += f", ttl {duration(lock.ttl_seconds)}"
    effect = (
        f"rename {lock.path} to {_tombstone(lock, tombstone_dir)}, then write a new"
        f" {lock.format} lock there held by {new_holder.operator} ({terms})"
    )
    return Plan(kind, lock, verdict, "lock_stolen", effect, new_content=content, recheck=True)


class FileActions(ActionsBase):
    name = ids.FILE
    kinds = frozenset({Kind.BREAK, Kind.STEAL, Kind.RELEASE})
    takes_paths = True

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        from lockwatch.sources.files.cas import inside
        from lockwatch.sources.files.decoders import writer

        roots = asked.given.get("roots")
        if roots is not None and lock.path is not None and not inside(lock.path, roots):
            return refused(
                kind, lock, verdict, "outside_roots", f"{lock.path} is outside the watched roots"
            )
        refusal = _refusal(lock)
        if refusal is not None:
            return refused(kind, lock, verdict, *refusal)
        assert lock.path is not None
        tombstone_dir = asked.tombstone_dir
        kernel = _kernel_held(kind, lock, verdict, asked)
        if kernel is not None:
            return kernel
        module = writer(lock.format)
        if module is not None and not getattr(module, "MOVABLE", True):
            # A database, dpkg's lock: its tool's own file, which it expects to stay.
            why = (
                f"{lock.path} is {module.WHAT}: its tool expects it to stay, so lockwatch"
                " never moves it (a holder is signalled instead)"
            )
            return refused(kind, lock, verdict, "never_moved", why)
        # Free (nobody holds it) counts as stale: clearing it needs no typed name.
        stale = verdict.state in (State.STALE, State.FREE)
        if kind is Kind.BREAK:
            effect = (
                f"rename {lock.path} to {_tombstone(lock, tombstone_dir)}"
                " (kept, never deleted: it can be moved back)"
            )
            return Plan(
                kind, lock, verdict, "lock_broken", effect, needs_name=not stale, recheck=True
            )
        if kind is Kind.CANCEL:
            why = "cancel ends a Postgres query; a lock file has none"
            return refused(kind, lock, verdict, "unsupported", why)
        if kind is Kind.RELEASE:
            if not asked.held:
                why = (
                    "lockwatch does not hold this lock (only locks it stole can be released);"
                    " break it instead"
                )
                return refused(kind, lock, verdict, "not_held", why)
            effect = f"rename {lock.path} to {_tombstone(lock, tombstone_dir)}: the lock is free"
            return Plan(kind, lock, verdict, "lock_released", effect)
        return _steal(kind, lock, verdict, asked, module, stale)

    def choices(self, kind: Kind, lock: Lock) -> Choices | None:
        """A lock file one kernel lock is held on: its break signals the holders,
        with the kernel's choice of signal."""
        evidence = facts_of(lock).evidence
        if kind is not Kind.BREAK or evidence is None or len(evidence.holds) != 1:
            return None
        from lockwatch.sources.filelocks import SIGNAL_CHOICES

        return SIGNAL_CHOICES

    def run(self, plan: Plan, doing: Doing) -> Done:
        from lockwatch.sources.files import cas

        lock = plan.lock
        assert lock.path is not None
        seen = doing.expect_sha256 or lock.sha256
        if plan.kind is Kind.STEAL:
            assert plan.new_content is not None and seen is not None
            moved = cas.replace(
                lock.path,
                seen,
                plan.new_content,
                stamp=doing.stamp,
                token=doing.action_id,
                tombstone_dir=doing.tombstone_dir,
                listed=facts_of(lock).file_key,
            )
            new_hash = cas.sha256_hex(plan.new_content)
            details = {
                "tombstone": moved.tombstone,
                "new_lock": decoded(plan.new_content),
                "new_lock_hash": f"sha256:{new_hash}",
            }
            message = f"stole {lock.path}; the stale lock is kept in {moved.tombstone}"
            return Done(
                details,
                message,
                tombstone=moved.tombstone,
                new_sha256=new_hash,
                new_content=plan.new_content,
            )
        moved = cas.move_aside(
            lock.path,
            seen,
            stamp=doing.stamp,
            tombstone_dir=doing.tombstone_dir,
            entry=facts_of(lock).entry,
            # The very file that was listed; a release's lock was rewritten by heartbeats.
            listed=facts_of(lock).file_key if plan.kind is Kind.BREAK else None,
        )
        verb = "released" if plan.kind is Kind.RELEASE else "broke"
        message = f"{verb} {lock.path}; kept in {moved.tombstone}"
        return Done({"tombstone": moved.tombstone}, message, tombstone=moved.tombstone)

    def unseen_id(self, target: str) -> str:
        return ids.file_id(os.path.abspath(target.removeprefix(f"{ids.FILE}:")))

    def unseen_target(self, lock_id: str) -> dict[str, Any]:
        path = ids.file_path(lock_id) or lock_id
        return {"source": self.name, "id": ids.file_id(path), "path": path}

    def tombstone_place(self, tombstone_dir: str | None) -> str | None:
        return tombstone_place(tombstone_dir)

    def moved_aside(self, path: str, tombstone_dir: str | None) -> bool:
        """A tombstone of `path`'s name in its tombstone directory: the lock was
        broken there (by another lockwatch a moment ago: on a loaded machine the
        winner of a race can be done before the loser looks at the path at all)."""
        directory, name = os.path.split(os.path.abspath(path))
        where = os.path.join(directory, tombstone_dir or TOMBSTONE_DIR)
        prefix = f"{name}@"
        try:
            with os.scandir(where) as entries:
                for number, entry in enumerate(entries):
                    if entry.name.startswith(prefix):
                        return True
                    if number >= _MAX_TOMBSTONES_LOOKED_AT:
                        break
        except OSError:  # no tombstone directory (or none readable): nothing was broken
            return False
        return False

    def refreshed(self, format: str, content: Any, now: datetime) -> bytes | None:
        from lockwatch.sources.files.decoders import writer

        module = writer(format)
        return module.refresh(content, now) if module is not None else None

    def rewrite(self, path: str, expected_sha256: str, content: bytes, *, token: str) -> None:
        from lockwatch.sources.files import cas

        cas.rewrite(path, expected_sha256, content, token=token)

    def reload(self, path: str) -> Lock | None:
        from lockwatch.model.lock import Lock
        from lockwatch.sources.files.scanner import load

        loaded = load(path)
        return loaded if isinstance(loaded, Lock) else None

    def rejudge(self, lock: Lock, clock: Clock, host: str) -> Verdict:
        if facts_of(lock).evidence is not None:
            # The kernel's word as it is now: someone may have taken the lock.
            from lockwatch.sources.files.evidence import Evidence, kernel_table

            (lock,) = Evidence(kernel_table()).attach([lock])
        return super().rejudge(lock, clock, host)


ACTIONS = FileActions()
