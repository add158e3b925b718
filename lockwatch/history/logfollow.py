"""Server logs followed into the history while the dashboard or `serve`
records (`--pg-log FILE`, issue 44 item 7): each new line is folded (the log's
source's fold, `contract.LogFolding`) and the waits it ends are added to the
store as waits from the log (`HistoryStore.add_waits`, origin `log`), in a
thread of its own with its own store connection: never on the UI thread or a
scrape's. A wait is added once it ended (the log says so); adding is
idempotent, so a log read again from its start (at the next start, after a
copytruncate) adds nothing twice.

A log that cannot be read (gone for a while during a rotation, a symlink put in
its place) is retried every round; `problem` says why meanwhile. A store that
fails stops the following (`failed`), as it stops the recorder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from lockwatch.history.api import HistoryError, HistoryStore
from lockwatch.sources.contract import LogFolding
from lockwatch.sources.logtail import LogTail

EVERY_SECONDS = 0.5


class LogFollower:
    def __init__(
        self,
        logs: Sequence[tuple[LogTail, LogFolding]],
        opener: Callable[[], HistoryStore],
        *,
        poll_seconds: float,
        every: float = EVERY_SECONDS,
    ) -> None:
        """`logs`: each file followed and its fold; `opener` opens the store in
        the follower's thread; `poll_seconds`: the recorder's poll (the waits
        fold with its polled ones as they do)."""
        self.logs = list(logs)
        self.every = every
        self.poll_seconds = poll_seconds
        self.failed: str | None = None
        self.added = 0  # waits added: tests wait on it
        self.rounds = 0  # rounds done (every log read to its current end)
        self._opener = opener
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="lockwatch-pg-log", daemon=True)
        self._thread.start()

    @property
    def problem(self) -> str | None:
        """Why a log cannot be read now, if one cannot."""
        return next((tail.problem for tail, _ in self.logs if tail.problem), None)

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def wait_rounds(self, rounds: int, timeout: float = 10.0) -> bool:
        """Wait until `rounds` rounds are done (tests: an event, not a sleep)."""
        with self._changed:
            self._changed.wait_for(
                lambda: self.rounds >= rounds or self.failed is not None, timeout
            )
        return self.rounds >= rounds

    def _run(self) -> None:
        try:
            store = self._opener()
        except HistoryError as exc:
            self._done(f"--pg-log: {exc}")
            return
        try:
            while True:
                added = sum(self._round(store, tail, folding) for tail, folding in self.logs)
                with self._changed:
                    self.added += added
                    self.rounds += 1
                    self._changed.notify_all()
                if self._stop.wait(self.every):
                    break
        except HistoryError as exc:
            self._done(f"--pg-log: {exc}")
        finally:
            for tail, _ in self.logs:
                tail.close()
            store.close()

    def _round(self, store: HistoryStore, tail: LogTail, folding: LogFolding) -> int:
        """Read `tail` to its current end (a chunk at a time); add what ended."""
        added = 0
        while not self._stop.is_set():
            lines = tail.lines()
            for line in lines:
                folding.feed(line)
            spans = folding.take()
            if spans:
                added += store.add_waits(spans, poll_seconds=self.poll_seconds)
            if not lines:
                return added
        return added

    def _done(self, why: str) -> None:
        with self._changed:
            self.failed = why
            self._changed.notify_all()
