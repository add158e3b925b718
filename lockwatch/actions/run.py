"""Carrying out a Plan: audit the intent, act, audit the result.

The dashboard and the CLI both come here, so both follow the same rules: a
reason is required, a lock that is not stale needs `force` (the typed name),
nothing happens if the intent cannot be audited, and every outcome (done,
refused, failed) is written to the audit log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from lockwatch.actions import files
from lockwatch.actions.audit import INTENT, AuditError, AuditLog, new_action_id
from lockwatch.actions.files import ActionFailed, ActionRefused
from lockwatch.actions.plan import Kind, Plan, own_actions
from lockwatch.model.compact import plain
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict

DsnLookup = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Outcome:
    ok: bool
    # What the audit log recorded as the result (lock_broken, action_refused, ...).
    event: str
    message: str
    code: str | None = None
    tombstone: str | None = None
    # The lock file lockwatch wrote (steal): its hash, for heartbeats and release.
    new_sha256: str | None = None
    new_content: bytes | None = None
    # False when the audit log could not record this outcome.
    audited: bool = True
    # A Postgres lock lockwatch now holds (a HeldAdvisory), until released.
    held: Any = None


def lock_hash(lock: Lock) -> str | None:
    """`sha256:<hex>` of what the operator saw: the file's bytes, or for a Postgres
    lock its pg_locks row as canonical JSON."""
    if lock.sha256 is not None:
        return f"sha256:{lock.sha256}"
    if lock.pg is not None and isinstance(lock.content, Mapping):
        row = plain(lock.content)
        canonical = json.dumps(row, sort_keys=True, default=str, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    return None


def target_of(lock: Lock) -> dict[str, Any]:
    target: dict[str, Any] = {
        "source": lock.source,
        "id": lock.id,
        "name": lock.name,
        "format": lock.format,
    }
    if lock.path is not None:
        target["path"] = lock.path
    if lock.kernel is not None:
        target.update(pid=lock.kernel.holder_pid, kernel=lock.kernel.as_json())
    if lock.store is not None:
        target.update(server=lock.store.server, key=lock.store.key)
    if lock.pg is not None:
        # The server's display name: never the DSN, which may hold a password.
        target.update(
            server=lock.pg.server,
            database=lock.pg.database,
            pid=lock.pg.backend.pid,
            locktype=lock.pg.locktype,
            mode=lock.pg.mode,
        )
    return target


def _stamp(action_id: str, log: AuditLog) -> str:
    at = log.clock.now().astimezone(UTC)
    return at.strftime("%Y%m%dT%H%M%S.%fZ") + "-" + action_id[:8]


def decoded(content: bytes | None) -> Any:
    """Lock bytes lockwatch wrote, as JSON when they are (the audit log's `new_lock`)."""
    if content is None:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "backslashreplace")


class Executor:
    """Runs plans for one operator, auditing to one log."""

    def __init__(
        self,
        audit: AuditLog,
        *,
        tombstone_dir: str | None = None,
        dsn_for: DsnLookup | None = None,
        rejudge: Callable[[Lock], Verdict] | None = None,
    ) -> None:
        self.audit = audit
        self.tombstone_dir = tombstone_dir
        self.dsn_for = dsn_for or (lambda server: None)
        self.rejudge = rejudge or self._judge_now

    def _judge_now(self, lock: Lock) -> Verdict:
        """The lock's verdict with the process table as it is now: the operator may
        have read the confirmation for a while, and a dead pid can come back."""
        from lockwatch.model.verdict import evaluate
        from lockwatch.sources.processes import PsutilProcesses

        if lock.source == "file" and lock.evidence is not None:
            # The kernel's word as it is now: someone may have taken the lock.
            from lockwatch.sources.files.evidence import Evidence, kernel_table

            (lock,) = Evidence(kernel_table()).attach([lock])
        return evaluate(lock, PsutilProcesses(), self.audit.clock, self.audit.host)

    def run(
        self,
        plan: Plan,
        reason: str,
        *,
        force: bool = False,
        expect_sha256: str | None = None,
        held: Any = None,
    ) -> Outcome:
        """`force`: the operator typed the lock's name (CLI: --force).
        `expect_sha256`: the bytes the operator saw, if not the plan's lock's.
        `held`: the HeldAdvisory a dashboard release lets go of."""
        lock = plan.lock
        action_id = new_action_id()
        reason = " ".join(reason.split())
        record: dict[str, Any] = {
            "action_id": action_id,
            "action": plan.kind.value,
            "target": target_of(lock),
            "previous_lock": plain(lock.content),
            "previous_lock_hash": lock_hash(lock),
            "state": plan.verdict.state.value,
            "reasons": list(plan.verdict.codes),
            "reason": reason,
            "effect": plan.effect,
            "forced": force,
        }
        if expect_sha256:
            # What the operator saw, when it is not what lockwatch read before asking.
            record["expected_lock_hash"] = f"sha256:{expect_sha256.lower()}"
        if not reason:
            return self._refuse(record, "no_reason", "a reason is required; nothing done")
        if plan.refusal is not None:
            return self._refuse(record, *plan.refusal)
        if plan.needs_name and not force:
            if plan.why_name:
                return self._refuse(
                    record,
                    "inferred",
                    f"{plan.why_name}: {plan.verb}ing it needs --force"
                    " (in the dashboard: type its name); nothing done",
                )
            return self._refuse(
                record,
                "not_stale",
                f"{lock.name} is {plan.verdict.state}, not stale: breaking it needs --force"
                " (in the dashboard: type its name)",
            )
        if (
            lock.source == "file"
            and plan.kind in (Kind.BREAK, Kind.STEAL)
            and plan.verdict.state in (State.STALE, State.FREE)
            and not force
        ):
            now = self.rejudge(lock)
            if now.state is not plan.verdict.state:
                why = "; ".join(r.message for r in now.reasons) or "its holder is alive"
                return self._refuse(
                    record,
                    "changed",
                    f"{lock.name} is {now.state} now, not stale ({why}): nothing done",
                )
        try:
            self.audit.append(INTENT, {**record, "intent": plan.event, "result": "pending"})
        except AuditError as exc:
            return Outcome(
                False,
                "action_refused",
                f"{exc}; nothing was done (no action goes unaudited)",
                code="audit_unwritable",
                audited=False,
            )
        try:
            details, outcome = self._act(plan, action_id, expect_sha256, held, force, record)
        except ActionRefused as exc:
            return self._refuse(record, exc.code, exc.message)
        except ActionFailed as exc:
            extra = {"tombstone": exc.tombstone} if exc.tombstone else {}
            return self._finish(
                record, "action_failed", "failed", exc.message, code=exc.code, extra=extra
            )
        except OSError as exc:
            return self._finish(
                record,
                "action_failed",
                "failed",
                f"{exc.strerror or exc}",
                code="os_error",
            )
        except Exception as exc:  # noqa: BLE001 - an intent must never stay without its result
            return self._finish(
                record,
                "action_failed",
                "failed",
                f"unexpected {type(exc).__name__}: {exc}",
                code="internal_error",
            )
        return self._finish(
            record, plan.event, "success", outcome.message, extra=details, base=outcome
        )

    def unseen(self, kind: Kind, target: str, reason: str, message: str) -> Outcome:
        """An action on a lock that is not there (gone, unreadable): refused, audited."""
        record: dict[str, Any] = {
            "action_id": new_action_id(),
            "action": kind.value,
            "target": _unseen_target(target),
            "previous_lock": None,
            "previous_lock_hash": None,
            "reason": " ".join(reason.split()),
        }
        return self._refuse(record, "not_found", message)

    def _act(
        self,
        plan: Plan,
        action_id: str,
        expect: str | None,
        held: Any,
        force: bool,
        record: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], Outcome]:
        lock = plan.lock
        if lock.source == "postgres":
            return self._act_pg(plan, held, force, record or {"action_id": action_id})
        if lock.source == "kernel":
            return self._act_kernel(plan)
        own = own_actions(lock)
        if own is not None:
            details, message = own.execute(plan, expect)
            return details, Outcome(True, plan.event, message)
        assert lock.path is not None
        seen = expect or lock.sha256
        stamp = _stamp(action_id, self.audit)
        if plan.kind is Kind.STEAL:
            assert plan.new_content is not None and seen is not None
            moved = files.replace(
                lock.path,
                seen,
                plan.new_content,
                stamp=stamp,
                token=action_id,
                tombstone_dir=self.tombstone_dir,
                listed=lock.file_key,
            )
            new_hash = files.sha256_hex(plan.new_content)
            details = {
                "tombstone": moved.tombstone,
                "new_lock": decoded(plan.new_content),
                "new_lock_hash": f"sha256:{new_hash}",
            }
            message = f"stole {lock.path}; the stale lock is kept in {moved.tombstone}"
            return details, Outcome(
                True,
                plan.event,
                message,
                tombstone=moved.tombstone,
                new_sha256=new_hash,
                new_content=plan.new_content,
            )
        moved = files.move_aside(
            lock.path,
            seen,
            stamp=stamp,
            tombstone_dir=self.tombstone_dir,
            entry=lock.entry,
            # The very file that was listed; a release's lock was rewritten by heartbeats.
            listed=lock.file_key if plan.kind is Kind.BREAK else None,
        )
        verb = "released" if plan.kind is Kind.RELEASE else "broke"
        message = f"{verb} {lock.path}; kept in {moved.tombstone}"
        return {"tombstone": moved.tombstone}, Outcome(
            True, plan.event, message, tombstone=moved.tombstone
        )

    def _act_kernel(self, plan: Plan) -> tuple[dict[str, Any], Outcome]:
        from lockwatch.actions.kernel import signal_holder

        lock = plan.lock
        signame = plan.signal or "TERM"
        started = plan.verdict.process.started_at if plan.verdict.process else None
        pid = signal_holder(lock, signame, started)
        message = (
            f"sent SIG{signame} to pid {pid}, holder of {lock.name}; the kernel frees the lock"
            " when it exits"
        )
        return {"pid": pid, "signal": f"SIG{signame}"}, Outcome(True, plan.event, message)

    def _act_pg(
        self, plan: Plan, held: Any, force: bool, record: dict[str, Any]
    ) -> tuple[dict[str, Any], Outcome]:
        from lockwatch.actions.postgres import PgActor

        lock = plan.lock
        assert lock.pg is not None
        if plan.kind is Kind.RELEASE and held is not None:
            unlocked = held.release()
            message = f"released {lock.name} on {lock.pg.server}"
            if not unlocked:
                message += " (the server had already let go of it: the connection is closed)"
            return {"unlocked": unlocked}, Outcome(True, plan.event, message)
        dsn = self.dsn_for(lock.pg.server)
        if dsn is None:
            raise ActionRefused("no_dsn", f"no DSN for {lock.pg.server}: name the server with --pg")
        actor = PgActor(dsn)
        pid = lock.pg.backend.pid
        server = lock.pg.server

        def terminated(gone: int) -> None:
            # Its own record the moment a backend is gone, whatever happens next.
            self._backend_terminated(plan, record, gone)

        if plan.kind is Kind.BREAK:
            # Judged stale for idling: still idle now, unless the operator forced it
            # against the verdict (a name typed for inferred staleness confirms it).
            stale = plan.verdict.state is State.STALE
            actor.terminate(lock, still_idle=stale and (not force or plan.why_name is not None))
            return {"pid": pid}, Outcome(True, plan.event, f"terminated pid {pid} on {server}")
        if plan.kind is Kind.CANCEL:
            actor.cancel(lock)
            return {"pid": pid}, Outcome(
                True, plan.event, f"cancelled the query of pid {pid} on {server}"
            )
        if plan.kind is Kind.RELEASE:
            actor.release_remote(lock, on_terminated=terminated)
            return {"pid": pid}, Outcome(
                True, plan.event, f"released {lock.name}: ended lockwatch session {pid}"
            )
        taken = actor.steal(lock, operator=self.audit.operator.name, on_terminated=terminated)
        details = {"terminated_pid": pid, "held_by_pid": taken.backend_pid}
        message = (
            f"terminated pid {pid} and took {lock.name} on {server}"
            f" (lockwatch session {taken.backend_pid} holds it)"
        )
        return details, Outcome(True, plan.event, message, held=taken)

    def _backend_terminated(self, plan: Plan, record: dict[str, Any], pid: int) -> None:
        """A `backend_terminated` record for a backend an action ended on its way
        (a steal, a remote release), written at once: the action may still fail."""
        lock = plan.lock
        server = lock.pg.server if lock.pg is not None else None
        fields = {
            **record,
            "result": "success",
            "pid": pid,
            "message": f"terminated pid {pid} on {server} (part of {plan.verb})",
        }
        # If it cannot be written, the action's result record says the log failed.
        with contextlib.suppress(AuditError):
            self.audit.append("backend_terminated", fields)

    def _refuse(self, record: dict[str, Any], code: str, message: str) -> Outcome:
        return self._finish(record, "action_refused", "refused", message, code=code)

    def _finish(
        self,
        record: dict[str, Any],
        event: str,
        result: str,
        message: str,
        *,
        code: str | None = None,
        extra: dict[str, Any] | None = None,
        base: Outcome | None = None,
    ) -> Outcome:
        fields = {**record, "result": result, "message": message, **(extra or {})}
        if code is not None:
            fields["code"] = code
        audited = True
        try:
            self.audit.append(event, fields)
        except AuditError as exc:
            audited = False
            message = f"{message} — WARNING: not audited: {exc}"
        if base is not None:
            return Outcome(
                base.ok,
                event,
                message,
                code,
                base.tombstone,
                base.new_sha256,
                base.new_content,
                audited,
                base.held,
            )
        return Outcome(
            result == "success",
            event,
            message,
            code,
            (extra or {}).get("tombstone"),
            audited=audited,
        )


def _unseen_target(target: str) -> dict[str, Any]:
    """What a TARGET that named no lock still says: its source, and its path or server."""
    from lockwatch.model import ids

    kind = ids.prefix(target)
    if kind == ids.PG:
        return {"source": "postgres", "id": target, "server": ids.pg_server(target)}
    if kind == ids.KERNEL:
        return {"source": "kernel", "id": target}
    if kind in (ids.REDIS, ids.ETCD):
        return {"source": kind, "id": target}
    path = ids.file_path(target) or target
    return {"source": "file", "id": ids.file_id(path), "path": path}
