"""Breaking a kernel lock: nobody can release another process's flock, fcntl
or OFD lock from outside, so every process holding it is signalled, and the
kernel frees it when the last of them has let go.

A flock or OFD lock is held by an open file, which every process that
inherited it shares (`flock LOCK sh -c 'sleep 900 & wait'`: flock(1), sh and
sleep): signalling the one pid /proc/locks names leaves the lock with the
others. So each wave signals every holder found now, and the break is done
only when the kernel no longer lists the lock; otherwise it fails naming who
still holds it.

Compare-and-swap, per process: its pidfd is opened first, so a signal can only
reach that very process; then it must still be the process the operator saw
(same start, in clock ticks since boot: a pid can be reused) and still hold the
lock through one of its fds, and be alive after that was read (so what was
read was its). A holder that appeared since the listing (a fork) is signalled
when it holds the lock; a process that let go of it is not.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lockwatch.model.action import ActionFailed, ActionRefused, Done
from lockwatch.sources.filelocks import KernelHolder, KernelLock
from lockwatch.sources.holders import describe
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.procfs import holds, listed, read_table

SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}
# How long SIGKILLed holders have to be gone: at once, unless one sleeps in the
# kernel (uninterruptible I/O), which no signal can hurry.
KILL_WAIT = 5.0
# A holder may let go without exiting (it closes its fd on SIGTERM): nothing
# signals that, so /proc/locks is looked at this often while waiting for exits.
CHECK_EVERY = 0.1

Note = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Target:
    """A holder made sure of: `pidfd` pins the very process."""

    holder: KernelHolder
    pidfd: int

    @property
    def pid(self) -> int:
        return self.holder.pid


def _named(holders: Sequence[KernelHolder]) -> str:
    return ", ".join(holder.label for holder in holders)


def _listing(holders: Sequence[KernelHolder]) -> list[dict[str, Any]]:
    return [{"pid": holder.pid, "command": holder.command} for holder in holders]


class Breaker:
    """One break of one kernel lock, as the operator saw it (`seen`)."""

    def __init__(
        self,
        name: str,
        seen: KernelFacts,
        note: Note,
        *,
        proc: str = "/proc",
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.seen = seen
        self.note = note
        self.proc = proc
        self.monotonic = monotonic
        # Every process known to have held it: an OFD lock (pid -1 in procfs)
        # is told from a newcomer's lock on the same file by these.
        self.known = set(seen.owners)
        self.targets: dict[int, Target] = {}

    # -- the whole break ------------------------------------------------------------

    def run(self, signame: str, grace: float, then: str | None) -> Done:
        try:
            return self._run(signame, grace, then)
        finally:
            for target in self.targets.values():
                os.close(target.pidfd)

    def _run(self, signame: str, grace: float, then: str | None) -> Done:
        now = self._current()
        if now is None:
            raise ActionRefused(
                "changed", f"{self.name} is no longer held: released or taken over; nothing done"
            )
        first = self._take(now, refuse_changed=True)
        if not first:
            raise ActionRefused(
                "changed",
                f"no process holds {self.name} as it was listed (its holders let go, or their"
                " fds cannot be read here); nothing done",
            )
        sent = self._signal(first, signame)
        if sent:
            self._wait(first, grace if signame == "TERM" else KILL_WAIT)
        now = self._current()
        if not sent and now is None:
            raise ActionRefused(
                "gone", f"the holders of {self.name} exited before any signal; nothing done"
            )
        killed: list[KernelHolder] = []
        if now is not None and then is not None and signame != then:
            second = self._take(now, refuse_changed=False)
            if second:
                killed = self._signal(second, then)
                self._wait(second, KILL_WAIT)
                now = self._current()
        if now is not None:
            self._still_held(now, sent, killed, signame, grace, then)
        message = (
            f"sent SIG{signame} to {_named(sent)}"
            if sent
            else f"SIG{signame} reached nobody (its holders exited meanwhile)"
        )
        if killed:
            message += f"; SIGKILL after {grace:g} s to {_named(killed)}"
        message += f"; the kernel no longer lists {self.name}"
        details: dict[str, Any] = {
            "pid": sent[0].pid if sent else None,
            "signal": f"SIG{signame}",
            "signalled": _listing(sent),
            "grace_seconds": grace,
        }
        if killed:
            details["killed"] = _listing(killed)
        return Done(details, message)

    # -- finding and making sure of the holders --------------------------------------

    def _same(self, lock: KernelLock) -> bool:
        """Whether `lock` (a /proc/locks line) is the lock that was seen."""
        seen = self.seen
        if lock.waiting or lock.file != seen.file or lock.type != seen.type:
            return False
        if (lock.start, lock.end) != (seen.start, seen.end):
            return False
        return lock.pid == seen.pid if seen.pid > 0 else True

    def _listed(self) -> bool:
        """Whether /proc/locks may still list it (no process's fds read)."""
        quick = listed(self.proc)
        if quick is None:
            raise ActionFailed("unreadable", f"cannot read {self.proc}/locks; the state is unknown")
        return any(self._same(lock) for lock in quick)

    def _current(self) -> KernelLock | None:
        """The lock as the kernel lists it now, with its owners; None once it is
        gone (/proc/locks alone says so, without reading any process's fds)."""
        if not self._listed():
            return None
        table = read_table(self.proc)
        for lock in table.locks:
            if self._same(lock) and (self.seen.pid > 0 or self.known & set(lock.owners)):
                return lock
        return None

    def _take(self, now: KernelLock, *, refuse_changed: bool) -> list[Target]:
        """The holders of `now` made sure of (see the module doc), pidfds open."""
        found = []
        for pid in now.owners or ((now.pid,) if now.pid > 0 else ()):
            if pid == os.getpid():
                raise ActionRefused("own_lock", f"{self.name} is held by lockwatch itself")
            target = self.targets.get(pid) or self._open(pid, now, refuse_changed)
            if target is not None:
                found.append(target)
        return found

    def _open(self, pid: int, now: KernelLock, refuse_changed: bool) -> Target | None:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return None  # exited since: it holds nothing
        try:
            holder = describe(pid, self.proc)
            seen = self.seen.described(pid)
            if holder is None or (seen is not None and not _same_process(seen, holder)):
                if holder is not None and refuse_changed:
                    raise ActionRefused(
                        "changed",
                        f"pid {pid} is another process now ({holder.label}); nothing done",
                    )
                os.close(pidfd)
                return None
            lock = replace(now, owners=())
            if not holds(self.proc, pid, lock):
                os.close(pidfd)
                return None
            # Alive after its fds were read: they were this process's.
            signal.pidfd_send_signal(pidfd, 0)
        except ProcessLookupError:
            os.close(pidfd)
            return None
        except BaseException:
            os.close(pidfd)
            raise
        target = Target(holder, pidfd)
        self.targets[pid] = target
        self.known.add(pid)
        return target

    # -- signalling and waiting --------------------------------------------------------

    def _signal(self, targets: list[Target], signame: str) -> list[KernelHolder]:
        sent: list[KernelHolder] = []
        denied: list[KernelHolder] = []
        for target in targets:
            try:
                signal.pidfd_send_signal(target.pidfd, SIGNALS[signame])
            except ProcessLookupError:
                continue  # exited meanwhile
            except PermissionError:
                denied.append(target.holder)
                continue
            sent.append(target.holder)
        if denied and not sent:
            raise ActionFailed(
                "permission_denied",
                f"not allowed to signal {_named(denied)} (another user's: run as root);"
                " nothing was sent",
            )
        if sent:
            message = f"sent SIG{signame} to {_named(sent)}, holding {self.name}"
            if denied:
                message += f"; not allowed to signal {_named(denied)}"
            self.note(
                "kernel_holders_signalled",
                {"signal": f"SIG{signame}", "signalled": _listing(sent), "message": message},
            )
        return sent

    def _wait(self, targets: list[Target], seconds: float) -> None:
        """Until every target has exited (its pidfd turns readable) or the lock is
        gone (a holder may close it and live on), `seconds` at most."""
        deadline = self.monotonic() + seconds
        poller = select.poll()
        pending = set()
        for target in targets:
            poller.register(target.pidfd, select.POLLIN)
            pending.add(target.pidfd)
        while pending:
            left = deadline - self.monotonic()
            if left <= 0:
                return
            for fd, _events in poller.poll(max(1, int(min(left, CHECK_EVERY) * 1000))):
                poller.unregister(fd)
                pending.discard(fd)
            if pending and not self._listed():
                return

    def _still_held(
        self,
        now: KernelLock,
        sent: list[KernelHolder],
        killed: list[KernelHolder],
        signame: str,
        grace: float,
        then: str | None,
    ) -> None:
        """Raise the failure that says who holds the lock still, after auditing
        exactly that (partial: some holders let go; failed: none did)."""
        describer = {holder.pid: holder for holder in now.holders}
        survivors = [describer.get(pid) or KernelHolder(pid) for pid in now.owners]
        gone = [holder for holder in sent if holder.pid not in now.owners]
        waited = f"{grace:g} s" if signame == "TERM" else f"{KILL_WAIT:g} s"
        steps = f"SIG{signame} and {waited}"
        if killed:
            steps += f", then SIGKILL and {KILL_WAIT:g} s"
        elif then is None and signame == "TERM":
            steps += " (no SIGKILL asked for)"
        who = _named(survivors) if survivors else "a process whose fds cannot be read here"
        message = f"{self.name} is still held by {who} after {steps}"
        if gone:
            message += f"; {_named(gone)} exited"
        self.note(
            "kernel_lock_still_held",
            {
                "result": "partial" if gone else "failed",
                "still_held_by": _listing(survivors),
                "exited": _listing(gone),
                "message": message,
            },
        )
        raise ActionFailed("still_held", message)


def _same_process(seen: KernelHolder, now: KernelHolder) -> bool:
    if seen.start_ticks is not None and now.start_ticks is not None:
        return seen.start_ticks == now.start_ticks
    if seen.started_at is not None and now.started_at is not None:
        return seen.started_at == now.started_at
    return True


def break_lock(
    name: str, seen: KernelFacts, signame: str, grace: float, then: str | None, note: Note
) -> Done:
    """Signal every holder of the kernel lock `seen` with `signame`; after
    `grace` seconds, `then` (KILL) to those still holding it; done only when
    /proc/locks no longer lists it (ActionFailed naming who holds it otherwise)."""
    return Breaker(name, seen, note).run(signame, grace, then)
