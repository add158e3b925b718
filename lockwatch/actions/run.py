"""Carrying out a Plan: audit the intent, act, audit the result.

The dashboard and the CLI both come here, so both follow the same rules: a
reason is required, a lock that is not stale needs `force` (the typed name),
nothing happens if the intent cannot be audited, and every outcome (done,
refused, failed) is written to the audit log.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from lockwatch.actions.audit import INTENT, AuditError, AuditLog, new_action_id
from lockwatch.actions.plan import provider
from lockwatch.model.action import ActionFailed, ActionRefused, Doing, Kind, Plan
from lockwatch.model.action import decoded as decoded  # for the session's held files
from lockwatch.model.compact import plain
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict


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
    # What lockwatch now holds for the operator (a source's holding), until released.
    held: Any = None
    # The audit record of the result (its `seq`): the history ties what the action
    # ended to it ("broken by ops, audit #41").
    audit_seq: int | None = None


def lock_hash(lock: Lock) -> str | None:
    """`sha256:<hex>` of what the operator saw: the file's bytes, or what its
    source hashes instead (a Postgres lock: its pg_locks row as canonical JSON)."""
    if lock.sha256 is not None:
        return f"sha256:{lock.sha256}"
    actions = provider(lock)
    seen = actions.seen_hash(lock) if actions is not None else None
    return None if seen is None else f"sha256:{seen}"


def target_of(lock: Lock) -> dict[str, Any]:
    target: dict[str, Any] = {
        "source": lock.source,
        "id": lock.id,
        "name": lock.name,
        "format": lock.format,
    }
    if lock.path is not None:
        target["path"] = lock.path
    actions = provider(lock)
    if actions is not None:
        target.update(actions.target(lock))
    return target


def _stamp(action_id: str, log: AuditLog) -> str:
    at = log.clock.now().astimezone(UTC)
    return at.strftime("%Y%m%dT%H%M%S.%fZ") + "-" + action_id[:8]


def _record(
    plan: Plan, action_id: str, reason: str, force: bool, expect_sha256: str | None
) -> dict[str, Any]:
    """The audit record of an action about to be tried."""
    lock = plan.lock
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
    return record


class Executor:
    """Runs plans for one operator, auditing to one log."""

    def __init__(
        self,
        audit: AuditLog,
        *,
        tombstone_dir: str | None = None,
        rejudge: Callable[[Lock], Verdict] | None = None,
        **reach: Any,
    ) -> None:
        """`reach`: how actions reach their servers, by the names the sources'
        providers read (what `ActionProvider.reach` answers)."""
        self.audit = audit
        self.tombstone_dir = tombstone_dir
        self.reach = {name: value for name, value in reach.items() if value is not None}
        self.rejudge = rejudge or self._judge_now

    def _judge_now(self, lock: Lock) -> Verdict:
        """The lock's verdict as things are now: the operator may have read the
        confirmation for a while, and a dead pid can come back."""
        actions = provider(lock)
        if actions is None:
            from lockwatch.model.verdict import evaluate
            from lockwatch.sources.processes import HostProcesses

            return evaluate(lock, HostProcesses(), self.audit.clock, self.audit.host)
        return actions.rejudge(lock, self.audit.clock, self.audit.host)

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
        action_id = new_action_id()
        reason = " ".join(reason.split())
        record = _record(plan, action_id, reason, force, expect_sha256)
        refusal = self._not_allowed(plan, record, reason, force)
        if refusal is not None:
            return refusal
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
                record, "action_failed", "failed", os_error_text(exc), code="os_error"
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

    def _not_allowed(
        self, plan: Plan, record: dict[str, Any], reason: str, force: bool
    ) -> Outcome | None:
        """The action refused (audited) before anything is touched: no reason, a
        refused plan, a name not typed, or a lock no longer stale; else None."""
        lock = plan.lock
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
        if plan.recheck and plan.verdict.state in (State.STALE, State.FREE) and not force:
            now = self.rejudge(lock)
            if now.state is not plan.verdict.state:
                why = "; ".join(r.message for r in now.reasons) or "its holder is alive"
                return self._refuse(
                    record,
                    "changed",
                    f"{lock.name} is {now.state} now, not stale ({why}): nothing done",
                )
        return None

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
        actions = provider(lock)
        if actions is None:
            raise ActionRefused("unsupported", f"{lock.source} locks cannot be acted on")
        base = record or {"action_id": action_id}

        def note(event: str, fields: dict[str, Any]) -> None:
            # If it cannot be written, the action's result record says the log failed.
            with contextlib.suppress(AuditError):
                self.audit.append(event, {**base, "result": "success", **fields})

        doing = Doing(
            action_id=action_id,
            stamp=_stamp(action_id, self.audit),
            expect_sha256=expect,
            force=force,
            operator=self.audit.operator.name,
            tombstone_dir=self.tombstone_dir,
            held=held,
            reach=self.reach,
            note=note,
        )
        done = actions.run(plan, doing)
        return done.details, Outcome(
            True,
            plan.event,
            done.message,
            tombstone=done.tombstone,
            new_sha256=done.new_sha256,
            new_content=done.new_content,
            held=done.held,
        )

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
        seq: int | None = None
        try:
            written = self.audit.append(event, fields)
            said = written.get("seq") if isinstance(written, dict) else None
            seq = said if isinstance(said, int) else None
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
                seq,
            )
        return Outcome(
            result == "success",
            event,
            message,
            code,
            (extra or {}).get("tombstone"),
            audited=audited,
            audit_seq=seq,
        )


def os_error_text(exc: OSError) -> str:
    """An OSError in words, with the paths it names: its strerror alone ("No such
    file or directory") does not say which, and the audit log is all there is."""
    names = [name for name in (exc.filename, exc.filename2) if name is not None]
    shown = [os.fsdecode(name) if isinstance(name, bytes) else str(name) for name in names]
    text = exc.strerror or str(exc)
    return f"{text}: {' -> '.join(shown)}" if shown else text


def _unseen_target(target: str) -> dict[str, Any]:
    """What a TARGET that named no lock still says: its source, and its path or
    server. An id no source has is named as it is, under no source."""
    from lockwatch.sources.registry import for_id

    source = for_id(target)
    if source is None or source.actions is None:
        return {"source": None if source is None else source.name, "id": target}
    return source.actions.unseen_target(target)
