"""Recording for the history tests: the real sources' feeds (as `serve` builds
them from its flags) into a Watcher with a Recorder on a history file, as
`lockwatch serve` runs them; and bounded waits on conditions, never on time."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from lockwatch.clock import SystemClock
from lockwatch.history.api import HistoryStore, open_history
from lockwatch.history.recorder import Recorder
from lockwatch.model.changes import ChangeSet
from lockwatch.serve.watcher import Watcher

WAIT_S = 60.0  # a bound for waits under a loaded machine, never a timing assertion
HOST = os.uname().nodename  # as the CLI names this host in what it records


def wait_until(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.02)


@contextlib.contextmanager
def recording(args: list[str], history: Path, poll: float = 0.2) -> Iterator[Watcher]:
    """A watcher over what `lockwatch serve ARGS` would watch, polling every
    `poll` seconds, recording into `history`; closed (flushed) on the way out."""
    from lockwatch.cli.serve import serve
    from lockwatch.cli.where import resolve_targets

    ctx = serve.make_context("serve", [*args, "--refresh", str(poll)])
    targets = resolve_targets(ctx.params, None)
    clock = SystemClock()
    feeds = [
        (source.name, feed)
        for source, selected in targets.sources
        for feed in selected.feeds(clock, HOST)
    ]

    def opener() -> HistoryStore:
        return open_history(str(history), host=HOST, write=True)

    recorder = Recorder(opener, poll_seconds=poll)
    watcher = Watcher(feeds, host=HOST, clock=clock, recorder=recorder)
    # When each change set was taken, by feed: how far apart polls really are.
    taken: dict[str, list[datetime]] = {}
    receive = watcher.receive

    def noted(change: ChangeSet) -> None:
        taken.setdefault(change.feed, []).append(change.at)
        receive(change)

    watcher.receive = noted  # type: ignore[method-assign]
    watcher.taken = taken  # type: ignore[attr-defined]
    watcher.start()
    try:
        yield watcher
    finally:
        watcher.stop()
        recorder.close()
        assert recorder.failed is None, recorder.failed


def poll_gap(watcher: Watcher) -> float:
    """The longest time between two change sets of one feed: one real poll."""
    taken: dict[str, list[datetime]] = watcher.taken  # type: ignore[attr-defined]
    gaps = [
        (later - earlier).total_seconds()
        for times in taken.values()
        for earlier, later in itertools.pairwise(times)
    ]
    return max(gaps, default=0.0)


def reader(history: Path) -> HistoryStore:
    return open_history(str(history), host=HOST)
