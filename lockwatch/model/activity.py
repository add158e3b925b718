"""What a lock's holder is doing now, in words: the one phrase builder behind
`why`'s next step ("apt-get (pid 4242) is waiting for input at its terminal").

A holder that is a server's session says it through its source's facts
(`Facts.activity`: idle in transaction for how long against the limit, running
a statement); a process on this host through what /proc showed of it at one
moment (`ProcessActivity`, read by `sources/processes.py`). Where neither can
tell, the phrase says so: never "at work" for a holder nobody saw working.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict


@dataclass(frozen=True, slots=True)
class ProcessActivity:
    """A process as /proc showed it once: its state and what it sleeps in."""

    state: str  # /proc/PID/stat's state letter: R, S, D, T, t, I, Z
    # The terminal its standard input is (/dev/pts/3); None: not a terminal.
    terminal: str | None = None
    # Its process group is that terminal's foreground group (stat's tpgid).
    foreground: bool = False
    # Its system call reads that terminal and nothing else (read(0), select on
    # fd 0 alone): True; it waits on something else: False; None: the call
    # cannot be read (/proc/PID/syscall needs ptrace access) or is ambiguous.
    reads_terminal: bool | None = None
    wchan: str | None = None  # the kernel function it sleeps in, where readable
    # Its children, as `sleep (pid 4243)`, where it waits for one to exit.
    children: tuple[str, ...] = ()


def process_doing(activity: ProcessActivity) -> str:
    """What a process is doing, as far as one look at /proc tells."""
    state = activity.state
    at = f" ({activity.terminal})" if activity.terminal else ""
    if state == "R":
        return "running"
    if state in ("T", "t"):
        return "stopped (by a signal or a debugger): it holds the lock until it is resumed"
    if state == "D":
        return "in an uninterruptible wait (disk or kernel)" + _in(activity.wchan)
    if state == "Z":
        return "exited (not yet reaped by its parent)"
    if activity.terminal and activity.foreground:
        if activity.reads_terminal:
            return f"waiting for input at its terminal{at}, not working"
        if activity.reads_terminal is None:
            return (
                f"asleep in the foreground of its terminal{at}{_in(activity.wchan)}: it may"
                " be waiting for input there (which call it sleeps in cannot be read)"
            )
    if activity.children and (activity.wchan or "").startswith("do_wait"):
        return f"asleep, not running, waiting for its child {', '.join(activity.children)} to exit"
    return "asleep, not running" + _in(activity.wchan)


# What common kernel functions a process sleeps in mean, in words: /proc's
# wchan (suffixes such as `.constprop.0` dropped).
_WCHANS = {
    "do_wait": "waiting for a child process to exit",
    "hrtimer_nanosleep": "in a timed sleep",
    "do_nanosleep": "in a timed sleep",
    "pipe_read": "waiting to read from a pipe",
    "pipe_wait": "waiting on a pipe",
    "pipe_write": "waiting to write to a pipe",
    "do_select": "waiting for input or events (select)",
    "core_sys_select": "waiting for input or events (select)",
    "poll_schedule_timeout": "waiting for input or events (poll)",
    "do_sys_poll": "waiting for input or events (poll)",
    "do_epoll_wait": "waiting for events (epoll)",
    "ep_poll": "waiting for events (epoll)",
    "futex_wait_queue": "waiting on a lock or condition of its own (futex)",
    "futex_wait_queue_me": "waiting on a lock or condition of its own (futex)",
    "sigsuspend": "waiting for a signal",
    "do_sigtimedwait": "waiting for a signal",
    "unix_stream_read_generic": "waiting to read a socket",
    "inet_csk_accept": "waiting for a connection",
    "wait_woken": "waiting to read (a terminal or socket)",
    "n_tty_read": "waiting to read its terminal",
    "locks_lock_inode_wait": "waiting for a file lock itself",
    "flock_lock_inode_wait": "waiting for a file lock itself",
}


def _in(wchan: str | None) -> str:
    if not wchan or wchan == "0":
        return ""
    function = wchan.split(".", 1)[0]
    meaning = _WCHANS.get(function)
    return f", {meaning} ({function})" if meaning else f", in {function}"


def holder_doing(
    lock: Lock, verdict: Verdict, now: datetime, process: ProcessActivity | None
) -> str:
    """What the holder is doing: its source's words for a session of a server,
    else its process's state on this host, else that nobody can see it."""
    facts = lock.facts
    said = None if facts is None else facts.activity(lock, verdict, now)
    if said:
        return said
    if process is not None:
        return process_doing(process)
    if verdict.alive:
        return "alive (what it is doing cannot be seen from here)"
    return "not seen from here"
