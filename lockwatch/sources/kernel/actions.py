"""Acting on a kernel lock: nobody can release another process's flock or
fcntl lock from outside, so the only action is to signal the processes that
hold it (sources/kernel/breaking.py), as the operator chose: SIGTERM, then
SIGKILL to those still holding it after a grace (the default), SIGTERM only,
or SIGKILL at once. The break is done only once the kernel no longer lists the
lock.
"""

from __future__ import annotations

from typing import Any

from lockwatch.model.action import ActionRefused, Asked, Doing, Done, Kind, Plan, refused
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.sources.contract import ActionsBase, Choices
from lockwatch.sources.filelocks import DEFAULT_GRACE, SIGNAL_CHOICES, KernelLock
from lockwatch.sources.kernel.facts import KernelFacts

SIGNAL_NAMES = ("TERM", "KILL")


def choice(given: Any) -> tuple[str, float, str | None]:
    """(signal, grace, then) from what the front end gave (`--signal`, `--grace`,
    `--no-kill`): TERM with KILL after 10 s unless told otherwise."""
    signame = str(given.get("signal") or "TERM").upper()
    if signame not in SIGNAL_NAMES:
        signame = "TERM"
    grace = given.get("grace")
    grace = DEFAULT_GRACE if grace is None else max(0.0, float(grace))
    then = None if signame == "KILL" or given.get("kill") is False else "KILL"
    return signame, grace, then


def effect(lock: Lock, kernel: KernelFacts, signame: str, grace: float, then: str | None) -> str:
    """The break's effect in words: who is signalled with what, when SIGKILL
    follows, and when it counts as done."""
    pids = kernel.pids
    named = []
    for pid in pids:
        holder = kernel.described(pid)
        named.append(holder.label if holder is not None else f"pid {pid}")
    who = (
        f"the {len(pids)} processes that share its open file: {', '.join(named)}"
        if len(pids) > 1
        else named[0]
    )
    if signame == "KILL":
        text = f"send SIGKILL (no clean-up) to {who}"
    else:
        text = f"send SIGTERM (asks to exit) to {who}"
        if then is not None:
            text += f"; SIGKILL (no clean-up) to any still holding it after {grace:g} s"
        else:
            text += (
                f"; no SIGKILL: if it is still held after {grace:g} s, the break fails naming"
                " who holds it"
            )
    text += f"; done only once the kernel no longer lists {lock.name}"
    waiters = len(kernel.blocking)
    if waiters:
        text += f", and then {waiters} waiting process{'es' if waiters != 1 else ''} may take it"
    return text


class KernelActions(ActionsBase):
    """Only a break, and it signals the holders: nobody releases another process's
    kernel lock from outside. The kernel frees it when the last holder exits."""

    name = "kernel"
    kinds = frozenset({Kind.BREAK})

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        kernel = lock.facts
        assert isinstance(kernel, KernelFacts)
        if kind is not Kind.BREAK:
            why = f"a kernel lock can only be broken by signalling its holders, not by {kind.value}"
            return refused(kind, lock, verdict, "unsupported", why)
        if kernel.waiting:
            why = f"this process waits for {lock.name}; it holds nothing"
            return refused(kind, lock, verdict, "not_held", why)
        if not kernel.pids:
            return refused(
                kind, lock, verdict, "no_holder", "lockwatch could not tell which process holds it"
            )
        signame, grace, then = choice(asked.given)
        said = effect(lock, kernel, signame, grace, then)
        # The holders are alive by definition: this always needs the typed name.
        return Plan(
            kind,
            lock,
            verdict,
            "holder_signalled",
            said,
            needs_name=True,
            signal=signame,
            grace=grace,
            then_signal=then,
        )

    def choices(self, kind: Kind, lock: Lock) -> Choices | None:
        return SIGNAL_CHOICES if kind is Kind.BREAK else None

    def run(self, plan: Plan, doing: Doing) -> Done:
        from lockwatch.sources.kernel.breaking import break_lock

        if doing.expect_sha256 is not None:
            # Never a check said to be made and not made (a lock file's break handed
            # here, `break PATH --signal --expect-sha256`): the compare-and-swap of
            # a kernel break is its holders, the same processes still holding it.
            raise ActionRefused(
                "unsupported",
                "--expect-sha256 compares a lock file's bytes; a kernel lock's break"
                " compares its holders instead: nothing signalled",
            )
        kernel = plan.lock.facts
        assert isinstance(kernel, KernelFacts)
        grace = DEFAULT_GRACE if plan.grace is None else plan.grace
        return break_lock(
            plan.lock.name, kernel, plan.signal or "TERM", grace, plan.then_signal, doing.note
        )

    def target(self, lock: Lock) -> dict[str, Any]:
        kernel = lock.facts
        if not isinstance(kernel, KernelFacts):
            return {}
        holders = [
            {"pid": pid, "command": holder.command if holder is not None else None}
            for pid in kernel.pids
            for holder in (kernel.described(pid),)
        ]
        return {"pid": kernel.holder_pid, "holders": holders, "kernel": kernel.as_json()}

    def unseen_target(self, lock_id: str) -> dict[str, Any]:
        return {"source": self.name, "id": lock_id}

    def plan_hold(
        self, kind: Kind, hold: KernelLock, path: str, verdict: Verdict, asked: Asked
    ) -> Plan:
        """A lock file's break handed here (sources/filelocks.HoldActions): the
        kernel lock's own file is another than the row's for a lock taken through
        a companion (Terraform's state, SQLite's -shm)."""
        from lockwatch.sources.kernel.records import lock_of

        return self.plan(kind, lock_of(hold, hold.path or path), verdict, asked)


ACTIONS = KernelActions()
