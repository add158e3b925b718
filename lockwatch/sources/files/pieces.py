"""A scan of lock trees read and judged a chunk at a time: the pieces a file
feed's first scan streams to the dashboard (from forked workers, or a thread),
and each rescan diffs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from lockwatch.fanout import Streamed
from lockwatch.model.changes import Entry
from lockwatch.model.lock import Lock
from lockwatch.model.status import ScanError
from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.files import kernel_found
from lockwatch.sources.files.decoded import worth_keeping
from lockwatch.sources.files.evidence import Evidence, kernel_listed, kernel_table_for
from lockwatch.sources.files.listing import MIN_AREAS_PER_JOB
from lockwatch.sources.files.protocols import NO_PROTOCOLS, Protocols
from lockwatch.sources.files.roots import PinnedRoots
from lockwatch.sources.files.scanner import Area, partition, scan_chunks, with_unread

# A scan is read and judged in chunks, the first of CHUNK_FIRST locks, each next
# one twice as large up to CHUNK_MOST: the first rows come after a few dozen
# files, not after the whole tree; later chunks are larger, as each costs a look
# at /proc/locks and the process table.
CHUNK_FIRST = 64
CHUNK_MOST = 1024
WORKER_NICE = 5
# The first scan is handed to the dashboard as it goes: a change set once
# CHUNK_FIRST locks are in or the first came STREAM_STEP_S ago, then at most one
# each STREAM_STEP_S (each costs the dashboard a redraw). A small tree, read
# whole within that, comes as one change set.
STREAM_STEP_S = 0.05
STREAM_TAKE_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class Piece:
    """A chunk of a scan, read and judged (in a worker, or a thread)."""

    entries: list[Entry]
    # The locks as decoded, of those the kernel's word changed in more than its
    # own fields (see `decoded.as_decoded`): few, usually none.
    decoded: list[Lock]
    errors: list[ScanError]
    held: dict[FileKey, str]  # files of its locks a kernel lock was held on: their paths


def read_pieces(
    areas: Sequence[Area],
    *,
    was_held: dict[FileKey, str],
    kernel_evidence: bool,
    judge_now: Callable[[Sequence[Lock]], list[Entry]],
    protocols: Protocols = NO_PROTOCOLS,
) -> Iterator[Piece]:
    """The locks in `areas`, read and judged a chunk at a time. Runs in a forked
    worker too: it changes nothing of the feed's. `judge_now`
    judges locks at this moment (with the feed's process table and host)."""
    evidence = Evidence(
        None, was_held=was_held, protocols=protocols
    )  # one per scan: its /proc passes once
    if kernel_evidence:
        kernel_found.refresh()  # files of any name a kernel lock is on: this walk lists them
    for chunk in scan_chunks(areas, first=CHUNK_FIRST, most=CHUNK_MOST):
        chunk = with_unread(chunk)  # a lock file it may not read: a row, as `ls` lists it
        if kernel_evidence:
            # /proc/locks is read after the chunk's files were (their kernel locks
            # were taken before they were written), its holders looked up for the
            # chunk's files alone (as `ls` does): a host's other locks cost a read
            # of /proc/locks, never a pass over every process's fds. A chunk with
            # none of its files locked reads nothing more.
            evidence.table = kernel_table_for(kernel_listed(), chunk.locks)
        attached = evidence.attach(chunk.locks)
        # Process facts are looked up after the files were read, afresh for
        # each chunk: a holder alive when it wrote its lock is then listed.
        entries = judge_now(attached)
        held, evidence.held_seen = evidence.held_seen, {}
        yield Piece(entries, worth_keeping(chunk.locks, attached), chunk.errors, held)


@dataclass(frozen=True, slots=True)
class Scan:
    """A first scan under way: its pieces, and what listing the roots found."""

    stream: Streamed[Piece]
    errors: list[ScanError]
    started: float  # time.monotonic()


def start_scan(
    pinned: PinnedRoots,
    jobs: int,
    work: Callable[[Sequence[Area]], Iterator[Piece]],
    *,
    fork: bool,
) -> Scan:
    """A scan of the roots started: in `jobs` forked workers (`fork`), else read
    here as it is taken, a slice at a time."""
    started = time.monotonic()
    roots, moved = pinned.usable()
    slices, errors = partition(roots, jobs, enough=MIN_AREAS_PER_JOB)
    errors = moved + errors
    # The workers yield the CPU to the dashboard, which starts meanwhile.
    return Scan(Streamed(slices, work, fork=fork, nice=WORKER_NICE), errors, started)
