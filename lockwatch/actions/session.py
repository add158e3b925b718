"""The dashboard's actions: plans for what the operator selected, run off the
event loop, and the locks lockwatch holds for the operator until released.

The UI never touches files or sockets itself: it asks this session for a plan,
shows it, and hands it back to `run` in a worker thread.
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lockwatch.actions.audit import AuditLog, Operator, log_path
from lockwatch.actions.audit_key import key_beside_log
from lockwatch.actions.plan import Kind, Plan, plan, provider
from lockwatch.actions.run import Executor, Outcome, decoded
from lockwatch.actions.targets import prepare
from lockwatch.clock import Clock
from lockwatch.model.action import ActionRefused
from lockwatch.model.handover import NewHolder
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import ActionProvider, Choices

# Heartbeats of held locks: a third of the time they stay fresh, and at least
# every 30 s, as the tower-fleet spec recommends (§5.2).
MAX_REFRESH_SECONDS = 30.0


@dataclass
class HeldFile:
    """A lock file lockwatch wrote for the operator (a steal)."""

    lock_id: str
    path: str
    name: str
    format: str
    actions: ActionProvider  # its source's: what rewrites and reloads it
    sha256: str  # of what lockwatch last wrote: heartbeats compare against it
    content: Any  # decoded, as the format's writer takes it
    refresh_every: float | None
    next_refresh: datetime | None


@dataclass
class Holdings:
    files: dict[str, HeldFile] = field(default_factory=dict)
    advisory: dict[str, Any] = field(default_factory=dict)  # lock id -> HeldAdvisory
    # The lock each advisory holding was stolen from: what releasing it is audited as.
    stolen_from: dict[str, Lock] = field(default_factory=dict)

    def ids(self) -> set[str]:
        return set(self.files) | set(self.advisory)

    def __len__(self) -> int:
        return len(self.files) + len(self.advisory)


def _refresh_every(lock: Lock) -> float | None:
    """How often lockwatch rewrites a lock it holds: at half the time after which
    its format calls a heartbeat late, so a held lock never looks late, even with
    a tick's delay and a slow write."""
    every = None if lock.facts is None else lock.facts.refresh_every(lock)
    return None if every is None else min(every, MAX_REFRESH_SECONDS)


class ActionSession:
    def __init__(
        self,
        *,
        clock: Clock,
        host: str,
        roots: Sequence[str],
        audit_log: Path | None = None,
        operator: str | None = None,
        tombstone_dir: str | None = None,
        reach: Mapping[str, Any] | None = None,
        given: Mapping[str, Any] | None = None,
        audit_key: Path | None = None,
        audit_anchor: Callable[[str], None] | None = None,
    ) -> None:
        """`reach`: how actions reach their servers, as `lockwatch.actions.reach`
        builds it for the CLI too. `given`: what every plan tells particular
        sources by the names their providers read (a front end's limits: the
        demo's sessions only, on a server it shares with others).
        `audit_key`, `audit_anchor`: the audit log's key file and anchor (AuditLog)."""
        self.clock = clock
        self.host = host
        self.roots = tuple(roots)
        self.operator = Operator.identify(operator)
        self.audit_path = log_path(audit_log, None)
        self.tombstone_dir = tombstone_dir
        self.given = dict(given or {})
        self.executor = Executor(
            AuditLog(
                self.audit_path,
                clock=clock,
                host=host,
                operator=self.operator,
                key_path=audit_key,
                anchor=audit_anchor,
            ),
            tombstone_dir=tombstone_dir,
            **(reach or {}),
        )
        # What the operator should know before acting (the dashboard shows them:
        # its stderr is behind the screen).
        beside = key_beside_log(self.executor.audit.key_path, self.audit_path)
        self.warnings: tuple[str, ...] = () if beside is None else (beside,)
        self.holdings = Holdings()
        self._lock = threading.Lock()
        # One writer of held lock files at a time: a heartbeat that outlasts the next
        # tick (a slow filesystem) or a release racing it would fail the other's
        # compare-and-swap and drop a lock lockwatch still holds on disk.
        self._writing = threading.Lock()

    # -- planning (on the event loop: no I/O but the roots check) -----------------

    def plan(
        self, kind: Kind, lock: Lock, verdict: Verdict, peers: Sequence[Lock], **given: Any
    ) -> Plan:
        """`given`: what the operator chose among the action's `choices`."""
        return prepare(
            kind,
            lock,
            verdict,
            peers=peers,
            new_holder=self._new_holder(""),
            tombstone_dir=self.tombstone_dir,
            held=lock.id in self.holdings.ids(),
            roots=self.roots,
            **{**self.given, **given},
        )

    def choices(self, kind: Kind, lock: Lock) -> Choices | None:
        """The ways `kind` may be carried out on `lock` that the operator picks from
        (a kernel break's signal), as its source offers them; None: one way."""
        actions = provider(lock)
        return None if actions is None else actions.choices(kind, lock)

    def _new_holder(self, reason: str) -> NewHolder:
        """The operator as a stolen lock records them: lockwatch's own pid keeps it
        alive (pid formats) for as long as the dashboard runs."""
        return NewHolder(
            operator=self.operator.name,
            pid=os.getpid(),
            own_pid=os.getpid(),
            host=self.host,
            at=self.clock.now(),
            token=uuid.uuid4().hex[:16],
            reason=" ".join(reason.split()),
        )

    def with_reason(self, the_plan: Plan, reason: str) -> Plan:
        """A steal's new lock records the reason: written once it is known."""
        if the_plan.kind is not Kind.STEAL or the_plan.new_content is None:
            return the_plan  # nothing written: nothing records the reason
        new_holder = self._new_holder(reason)
        return plan(
            Kind.STEAL,
            the_plan.lock,
            the_plan.verdict,
            new_holder=new_holder,
            tombstone_dir=self.tombstone_dir,
        )

    # -- acting (in a worker thread) -----------------------------------------------

    def run(self, the_plan: Plan, reason: str, *, force: bool = False) -> Outcome:
        lock = the_plan.lock
        with self._lock:
            held = self.holdings.advisory.get(lock.id)
            held_file = self.holdings.files.get(lock.id)
        if held_file is not None or held is not None:
            # A lock lockwatch holds: after any heartbeat in flight, so the hash it
            # compares is current and no heartbeat writes it back behind this action.
            with self._writing:
                return self._run(the_plan, reason, force, held, held_file)
        return self._run(the_plan, reason, force, None, None)

    def _run(
        self,
        the_plan: Plan,
        reason: str,
        force: bool,
        held: Any,
        held_file: HeldFile | None,
    ) -> Outcome:
        lock = the_plan.lock
        if held_file is not None and the_plan.kind in (Kind.RELEASE, Kind.BREAK):
            outcome = self.executor.run(
                the_plan, reason, force=force, expect_sha256=held_file.sha256
            )
            if outcome.ok or outcome.code in ("gone", "changed"):
                with self._lock:
                    self.holdings.files.pop(lock.id, None)
            return outcome
        the_plan = self.with_reason(the_plan, reason)
        outcome = self.executor.run(
            the_plan, reason, force=force, held=held if the_plan.kind is Kind.RELEASE else None
        )
        if not outcome.ok:
            return outcome
        actions = provider(lock)
        with self._lock:
            if the_plan.kind is Kind.RELEASE or (the_plan.kind is Kind.BREAK and held):
                self.holdings.advisory.pop(lock.id, None)
                self.holdings.stolen_from.pop(lock.id, None)
            elif the_plan.kind is Kind.BREAK:
                # A lock lockwatch held, broken (b instead of r): no longer held, so no
                # heartbeat finds it gone and calls it lost.
                self.holdings.files.pop(lock.id, None)
            elif the_plan.kind is Kind.STEAL and outcome.held is not None:
                self.holdings.advisory[outcome.held.lock_id] = outcome.held
                self.holdings.stolen_from[outcome.held.lock_id] = lock
            elif the_plan.kind is Kind.STEAL and outcome.new_sha256 and lock.path and actions:
                every = _refresh_every(lock)
                now = self.clock.now()
                self.holdings.files[lock.id] = HeldFile(
                    lock_id=lock.id,
                    path=lock.path,
                    name=lock.name,
                    format=lock.format,
                    actions=actions,
                    sha256=outcome.new_sha256,
                    content=decoded(outcome.new_content),
                    refresh_every=every,
                    next_refresh=now + timedelta(seconds=every) if every else None,
                )
        return outcome

    def held_ids(self) -> set[str]:
        with self._lock:
            return self.holdings.ids()

    def held_names(self) -> list[str]:
        with self._lock:
            return [h.name for h in self.holdings.files.values()] + [
                h.name for h in self.holdings.advisory.values()
            ]

    def due(self, now: datetime) -> bool:
        with self._lock:
            return any(
                h.next_refresh is not None and h.next_refresh <= now
                for h in self.holdings.files.values()
            ) or bool(self.holdings.advisory)

    def heartbeat(self, now: datetime) -> list[str]:
        """Refresh held locks whose time has come; what was lost, in words. Nothing
        while another heartbeat or a release is still writing: the next tick comes."""
        if not self._writing.acquire(blocking=False):
            return []
        try:
            return self._beat(now)
        finally:
            self._writing.release()

    def _beat(self, now: datetime) -> list[str]:
        lost: list[str] = []
        with self._lock:
            held_files = list(self.holdings.files.values())
            advisory = list(self.holdings.advisory.items())
        for held in held_files:
            if held.next_refresh is None or held.next_refresh > now or held.refresh_every is None:
                continue
            content = held.actions.refreshed(held.format, held.content, now)
            if content is None:
                held.next_refresh = None
                continue
            try:
                held.actions.rewrite(held.path, held.sha256, content, token=uuid.uuid4().hex)
            except (ActionRefused, OSError) as exc:
                with self._lock:
                    self.holdings.files.pop(held.lock_id, None)
                lost.append(f"{held.name}: no longer held by you ({_why(exc)})")
                continue
            held.sha256 = hashlib.sha256(content).hexdigest()
            held.content = decoded(content)
            held.next_refresh = now + timedelta(seconds=held.refresh_every)
        for lock_id, taken in advisory:
            if not taken.alive():
                with self._lock:
                    self.holdings.advisory.pop(lock_id, None)
                lost.append(f"{taken.name}: lockwatch's session holding it ended")
        return lost

    def abandon(self, why: str) -> None:
        """lockwatch is leaving without anyone to ask (its terminal went away):
        keep every held lock as a crash would (lock files stay, naming this
        process; Postgres locks end with its sessions) and audit what was kept."""
        with self._lock:
            files = [(lock_id, held.name) for lock_id, held in self.holdings.files.items()]
            advisory = [(lock_id, taken.name) for lock_id, taken in self.holdings.advisory.items()]
        if not (files or advisory):
            return
        self.executor.audit.append(
            "locks_kept",
            {
                "reason": why,
                "kept": [{"id": lock_id, "name": name} for lock_id, name in files],
                "ended_with_session": [{"id": lock_id, "name": name} for lock_id, name in advisory],
            },
        )

    def release_all(self, reason: str, *, files: bool = True) -> list[str]:
        """Let go of everything held (quitting), or only the Postgres locks (which
        end with lockwatch's sessions anyway) when `files` is false; each through
        the audited executor. What happened, in words."""
        results: list[str] = []
        with self._lock:
            held_files = list(self.holdings.files.values()) if files else []
            advisory = [
                (taken, self.holdings.stolen_from[lock_id])
                for lock_id, taken in self.holdings.advisory.items()
            ]
            self.holdings = Holdings()
        with self._writing:  # a heartbeat in flight finishes first
            for held in held_files:
                loaded = held.actions.reload(held.path)
                if loaded is None:
                    results.append(f"{held.name}: already gone")
                    continue
                the_plan = plan(Kind.RELEASE, loaded, Verdict(State.ACTIVE), held=True)
                outcome = self.executor.run(the_plan, reason, expect_sha256=held.sha256)
                results.append(outcome.message)
        for taken, seen in advisory:
            the_plan = plan(Kind.RELEASE, taken.as_lock(seen), Verdict(State.ACTIVE), held=True)
            outcome = self.executor.run(the_plan, reason, held=taken)
            if not outcome.ok:
                taken.release()  # lockwatch is leaving: its session ends either way
            results.append(outcome.message)
        return results


def _why(exc: Exception) -> str:
    if isinstance(exc, ActionRefused):
        return exc.message
    return str(exc)
