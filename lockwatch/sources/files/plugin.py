"""The file source: lock files under the PATHs given (default: the current
directory), each judged by its format's rules and the kernel's word."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import click

from lockwatch.model.slots import lean_dataclass
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.sources.contract import Collected, Hint, SourceError
from lockwatch.sources.declaring import Declaring
from lockwatch.sources.files import ids
from lockwatch.sources.named import answered_by

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import (
        ActionProvider,
        Decorator,
        Found,
        ListingRequest,
        Selected,
        Wanted,
    )
    from lockwatch.sources.feed import Feed
    from lockwatch.sources.files.protocols import Protocols


T = TypeVar("T")

# What a scan finds, in words (the empty dashboard says it).
LOOKED_FOR = (
    "*.lock, *.pid, lock directories and files tools name their own way,"
    " and files the kernel holds a lock on"
)


class FilesSource(Declaring):
    # Its label is its name; asked by PATHs.
    name = "file"
    id_prefix = ids.FILE
    summary = (
        "lock files under PATHs: the seed formats, pid files and bare lock files,"
        " with the kernel's flock/fcntl locks on them"
    )
    config_tables: tuple[str, ...] = ("protocols",)
    title = "files under"
    # A holder pid that is not running: whoever takes the lock next took it from the dead.
    holder_gone = frozenset({"holder_dead"})
    asking = ("paths",)

    @property
    def record_types(self) -> tuple[type, ...]:
        # Its facts' types, for recordings: loaded when asked, not at the CLI's start.
        from lockwatch.sources.filelocks import FileKey, KernelEvidence, KernelHolder, KernelLock
        from lockwatch.sources.files.facts import FileFacts
        from lockwatch.sources.files.policy import StalenessPolicy

        return (FileFacts, StalenessPolicy, FileKey, KernelEvidence, KernelLock, KernelHolder)

    @property
    def actions(self) -> ActionProvider:
        # Loaded when an action is planned, not when the CLI starts.
        from lockwatch.sources.files.actions import ACTIONS

        return ACTIONS

    def options(self) -> Sequence[Decorator]:
        return [click.argument("paths", nargs=-1, metavar="[PATH]...")]

    def may_run(self, wanted: Wanted) -> bool:
        # Unasked, it looks at the current directory: its select decides.
        return True

    def read_config(self, tables: Mapping[str, Any], where: str) -> Protocols | None:
        if "protocols" not in tables:
            return None  # no [[protocols]]: none declared, and `ls --pg` loads no reader
        from lockwatch.sources.files.protocols import read_protocols

        return read_protocols(tables["protocols"], where)

    def select(self, wanted: Wanted) -> Selected | None:
        if any(not path for path in wanted.paths):
            raise SourceError("PATH: an empty PATH (an unset variable?)")
        # With only other sources asked for (--pg, --kernel) and no PATH: no files.
        roots = wanted.paths or (() if wanted.others_asked else (".",))
        # The [[protocols]] read_config read (None: the config was not read).
        protocols = wanted.settings(self.name)
        return SelectedFiles(tuple(roots), protocols) if roots else None

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return find_file(target, host, wanted.settings(self.name))

    def hint(self, wanted: Wanted, running: bool) -> Hint | None:
        if not running:
            return None
        roots = wanted.paths or (".",)
        where = ", ".join(os.path.abspath(root) for root in roots)
        return Hint(looked_for=f"{LOOKED_FOR}, under {where}")

    def clues(self, text: str) -> Sequence[Clue]:
        from lockwatch.sources.files.messages import clues
        from lockwatch.sources.files.scanner import is_candidate

        return clues(text, lambda path: is_candidate(path, "file"))


@lean_dataclass(frozen=True)
class SelectedFiles:
    roots: tuple[str, ...]
    # What the config declares paths' locks to be ([[protocols]]).
    protocols: Protocols | None = None

    @property
    def _declared(self) -> Protocols:
        from lockwatch.sources.files.protocols import NO_PROTOCOLS

        return self.protocols or NO_PROTOCOLS

    @property
    def lock_trees(self) -> tuple[str, ...]:
        # contract.Walking: the trees the dashboard's file actions stay inside.
        return self.roots

    def collect(self, request: ListingRequest) -> Collected:
        from lockwatch.sources.procfs import listed as read_listed

        # /proc/locks' files, no process looked at yet: the full read is narrowed to
        # the scanned lock files (a host's other locks cost nothing). Its first read
        # in a process sleeps through an RCU grace period (the kernel's reader takes
        # file_rwsem for writing), some 10 ms with no CPU: it is read in a thread
        # while the scan's code is imported. Joined before any walk: the walks list
        # the files it names whatever their names (kernel_found).
        reading = _Background(read_listed)
        from lockwatch.sources.files.evidence import Evidence, kernel_table_for, listed_keys

        out = Collected(places=[f"under {', '.join(self.roots)} (looked for {LOOKED_FOR})"])
        if request.as_json:
            from lockwatch.sources.files.listing import json_listing

            listed = listed_keys(reading.result())
            listing = json_listing(
                self.roots, request.now, request.host, request.jobs, listed, self._declared
            )
            out.arrays, out.errors, out.stale = listing.arrays, listing.errors, listing.stale
            unread = listing.unread
        else:
            from lockwatch.clock import FrozenClock
            from lockwatch.model.assess import assess
            from lockwatch.model.verdict import State
            from lockwatch.sources.files.scanner import scan
            from lockwatch.sources.processes import HostProcesses

            listed = listed_keys(reading.result())
            result = scan(self.roots)
            table = kernel_table_for(listed, result.locks)
            locks = Evidence(table, protocols=self._declared).attach(result.locks)
            out.assessed = assess(locks, HostProcesses(), FrozenClock(request.now), request.host)
            out.errors = result.errors
            out.stale = sum(verdict.state is State.STALE for _, verdict in out.assessed)
            unread = result.unread
        if unread:
            out.warnings.append(unread_note(unread))
        out.statuses = _statuses(self.roots, out.errors, request.now)
        named = {os.path.abspath(root) for root in self.roots}
        out.usage_errors = any(error.path in named for error in out.errors)
        return out

    def feeds(self, clock: Clock, host: str) -> Sequence[Feed]:
        from lockwatch.sources.files.watch import FileFeed

        # Watched as their real paths: a lock is only ever acted on through a path
        # without symlinks (sources/files/cas.py), so a root named through one (/var/lock
        # -> /run/lock) is listed where its locks really are.
        roots = [os.path.realpath(root) for root in self.roots]
        feed = FileFeed(roots, host=host, clock=clock, protocols=self._declared)
        # The first scan starts now, in workers, while the dashboard starts up.
        feed.prefetch()
        return [feed]


class _Background(Generic[T]):
    """`work()` in a thread from now on; `result()` waits for it (and raises what
    it raised). Nothing else runs meanwhile but the caller: join it before a fork."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self._value: T | None = None
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="lockwatch-proc-locks")
        self._thread.daemon = True
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except Exception as exc:  # noqa: BLE001 - handed to the caller, raised there
            self._error = exc

    def result(self) -> T | None:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def find_file(target: str, host: str, protocols: Protocols | None = None) -> Found | str:
    """The lock file `target` (a path or a file: id) names, judged now."""
    from lockwatch.clock import SystemClock
    from lockwatch.model.verdict import evaluate
    from lockwatch.sources.files.evidence import Evidence, kernel_table
    from lockwatch.sources.files.protocols import NO_PROTOCOLS
    from lockwatch.sources.files.scanner import is_candidate, load, unread_lock
    from lockwatch.sources.processes import HostProcesses

    path = os.path.abspath(ids.file_path(target) or target)
    if os.path.isdir(path) and not os.path.islink(path) and not is_candidate(path, "dir"):
        raise SourceError(f"{path} is a directory; name a lock file (or a lock directory)")
    loaded = load(path)
    if isinstance(loaded, ScanError):
        loaded = unread_lock(loaded) or loaded  # a root-only lock: from its place
    if loaded is None:
        return f"no lock at {path}: it is gone (released, or broken by someone else)"
    if isinstance(loaded, ScanError):
        return f"cannot read {path}: {loaded.message}"
    (lock,) = Evidence(kernel_table(), protocols=protocols or NO_PROTOCOLS).attach([loaded])
    verdict = evaluate(lock, HostProcesses(), SystemClock(), host)
    return lock, verdict, [lock]


def unread_note(count: int) -> str:
    """One line for the lock files listed unread, in place of an error each."""
    files = "1 lock file" if count == 1 else f"{count} lock files"
    return (
        f"{files} could not be read (permission denied): listed from their place and"
        " the kernel's locks on them (reason permission_denied); run as their owner to read them"
    )


def _statuses(
    roots: Sequence[str], errors: Sequence[ScanError], now: datetime
) -> list[SourceStatus]:
    failed = {error.path: error for error in errors}
    statuses = []
    for root in roots:
        path = os.path.abspath(root)
        error = failed.get(path)
        statuses.append(
            SourceStatus(
                "file",
                path,
                "error" if error else "ok",
                reason=error.message if error else None,
                updated_at=None if error else now,
            )
        )
    return statuses


def _listed_by_name(path: str) -> bool:
    # Loaded when a kernel feed first asks: not every run walks files.
    from lockwatch.sources.files.scanner import is_candidate

    return is_candidate(path, "file")


SOURCE = FilesSource()
# The kernel source's live feed asks which files a walk lists by name (named.py).
answered_by(_listed_by_name)
