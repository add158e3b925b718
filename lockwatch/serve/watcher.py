"""The dashboard's collection, headless: every selected source's live feeds
hand their change sets to one Board, on an event loop of its own in a thread,
and time re-judges locks whose deadline passed (a lock turns stale on time,
not only when something is read again). HTTP handlers read the Board under the
same lock, so a scrape never sees half a change set.

A feed that fails is started again with backoff (nobody watches a service's
screen); its sources say `error` meanwhile.

What the listener says about the sources (`statuses`) covers every one that
was configured: a feed that has not answered yet has a status saying so (a
remote that never answers is down from the start, not absent), and one that
polls on an interval but has gone quiet well past it (a poll that hangs) is
down with the time it has been quiet. Health waits for every feed's first full
look: a tree's first scan hands over locks in pieces before its statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import LIVE_STATES, SourceStatus, backoff_seconds, failure_cause
from lockwatch.model.text import terminal_safe
from lockwatch.serve.pace import WAKE_WAIT, Pace
from lockwatch.sources.feed import Feed

if TYPE_CHECKING:
    from lockwatch.history.recorder import Recorder

TICK_SECONDS = 1.0
# A polling feed whose sources are up is stalled once it has said nothing for
# its interval and this long: past any poll's own deadline, so the feed's own
# word ("stalled after N s", from the poller) comes first where it has one.
STALL_SECONDS = 30.0
NO_ANSWER = "no answer yet"


class Watcher:
    def __init__(
        self,
        feeds: Sequence[tuple[str, Feed]],
        *,
        host: str,
        clock: Clock | None = None,
        tick_seconds: float = TICK_SECONDS,
        stall_seconds: float = STALL_SECONDS,
        pace: Pace | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        """`feeds`: each feed with the name of the source (registry) it belongs to.
        `pace`: how often the feeds that take one poll (pace.py); None: their own
        interval always."""
        self.clock = clock or SystemClock()
        self.board = Board(host)
        self.tick_seconds = tick_seconds
        self._feeds = list(feeds)
        self._source_of = {feed.name: source for source, feed in self._feeds}
        self.sources = tuple(dict.fromkeys(source for source, _ in self._feeds))
        self._guard = threading.Lock()
        self._heard_anew = threading.Condition(self._guard)
        self.pace = pace
        # The history's recorder (history/recorder.py): handed each change as applied.
        self.recorder = recorder
        # The feeds that take a pace: they wait between polls with `sleep`.
        self._paced = [feed for _, feed in self._feeds if hasattr(feed, "sleep")]
        # By source: how long its last collection took, from its start to its
        # change set being applied.
        self.durations: dict[str, float] = {}
        # By (source kind, name): when it last produced a good picture.
        self.last_success: dict[tuple[str, str], datetime] = {}
        self.stall_seconds = stall_seconds
        # Feeds that have handed over a first full look (statuses, none still
        # connecting), and when each feed last handed over anything.
        self._reported: set[str] = set()
        self._heard: dict[str, datetime] = {}
        self._beat: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()

    # -- running ------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lockwatch-watcher", daemon=True)
        self._thread.start()
        self._started.wait(10)

    def stop(self, timeout: float = 10.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self.pace is not None:
            self.pace.bind(self._loop)
            for feed in self._paced:
                feed.sleep = self.pace.sleep
        self._started.set()
        tasks = [asyncio.create_task(self._keep(feed)) for _, feed in self._feeds]
        tasks.append(asyncio.create_task(self._ticker()))
        try:
            await self._stop.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for _, feed in self._feeds:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(feed.close(), 5)

    async def _keep(self, feed: Feed) -> None:
        failures = 0
        while True:
            try:
                await feed.run(self.receive)
                reason = "stopped"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - one source's bug must not stop the rest
                reason = f"stopped: {failure_cause(exc)}"
            failures += 1
            wait = backoff_seconds(failures)
            reason = terminal_safe(f"{reason}; started again in {wait:.0f}s")
            print(f"lockwatch serve: {feed.name}: {reason}", file=sys.stderr, flush=True)
            with self._guard:
                kept = self.board.statuses.get(feed.name, ())
            statuses = tuple(
                SourceStatus(status.kind, status.name, "error", reason=reason) for status in kept
            ) or (
                SourceStatus(self._source_of.get(feed.name, feed.name), feed.name, "error", reason),
            )
            self.receive(ChangeSet(feed.name, self.clock.now(), statuses))
            await asyncio.sleep(wait)

    async def _ticker(self) -> None:
        while True:
            self.tick()
            await asyncio.sleep(self.tick_seconds)

    # -- data in --------------------------------------------------------------------

    def receive(self, change: ChangeSet) -> None:
        applied_at = self.clock.now()
        with self._guard:
            try:
                applied = self.board.apply(change)
            except Exception as exc:  # noqa: BLE001 - one bad change set must not stop its feed
                message = terminal_safe(
                    f"{change.feed}: a change set could not be applied: {exc!r}"
                )
                print(f"lockwatch serve: {message}", file=sys.stderr, flush=True)
                return
            if self.recorder is not None:
                self.recorder.observe(self.board, applied, change.at)
            self._heard[change.feed] = applied_at
            self._heard_anew.notify_all()
            if change.statuses and all(s.state != "connecting" for s in change.statuses):
                self._reported.add(change.feed)
            source = self._source_of.get(change.feed)
            if source is not None:
                took = (applied_at - change.at).total_seconds()
                self.durations[source] = max(0.0, took)
            for status in change.statuses:
                if status.state in LIVE_STATES:
                    self.last_success[(status.kind, status.name)] = status.updated_at or change.at

    def tick(self) -> None:
        now = self.clock.now()
        with self._guard:
            applied = self.board.tick(now)
            if self.recorder is not None:
                self.recorder.observe(self.board, applied, now)
        self._beat = time.monotonic()

    def asked(self, wait: float = WAKE_WAIT) -> None:
        """Someone asked for what was collected (a scrape, the document): an idle
        serve's feeds are woken, and this waits (`wait` at most) until each of
        them has handed over a fresh look."""
        if self.pace is None or not self.pace.asked():
            return
        since = self.clock.now()
        until = time.monotonic() + wait
        with self._heard_anew:
            while True:
                stale = [
                    feed
                    for feed in self._paced
                    if (heard := self._heard.get(feed.name)) is None or heard < since
                ]
                left = until - time.monotonic()
                if not stale or left <= 0:
                    return
                self._heard_anew.wait(left)

    # -- reading --------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self, now: datetime) -> Iterator[Board]:
        """The Board as of `now`, held still while the caller reads it."""
        with self._guard:
            self.board.tick(now)
            yield self.board

    def statuses(self, board: Board, now: datetime) -> list[SourceStatus]:
        """Every configured source's status as of `now` (the caller holds the
        board, as `reading` gives it): the board's, a feed's that went quiet
        marked down, and one for each feed that has said nothing yet."""
        out: list[SourceStatus] = []
        for source, feed in self._feeds:
            kept = board.statuses.get(feed.name, ())
            if not kept:
                name = feed.name.partition(":")[2] or feed.name
                out.append(SourceStatus(source, name, "connecting", reason=NO_ANSWER))
                continue
            quiet = self._quiet_for(feed, now)
            if quiet is None:
                out.extend(kept)
                continue
            reason = f"stalled: nothing from it for {quiet:.0f} s"
            out.extend(
                replace(status, state="error", reason=reason)
                if status.state in LIVE_STATES
                else status
                for status in kept
            )
        for name, kept in board.statuses.items():
            if name not in self._source_of:
                out.extend(kept)  # handed over by no feed of ours (a test's, a replay's)
        return out

    def _quiet_for(self, feed: Feed, now: datetime) -> float | None:
        """How long a feed has been stalled, if it is: it says so itself (its
        `health.up` is false), or it polls every `interval` and has said nothing
        for that and `stall_seconds` more."""
        health = getattr(feed, "health", None)
        heard = self._heard.get(feed.name)
        quiet = 0.0 if heard is None else max(0.0, (now - heard).total_seconds())
        if health is not None and getattr(health, "up", True) is False:
            return quiet
        interval = getattr(feed, "interval", None)
        if isinstance(interval, int | float) and self.pace is not None and feed in self._paced:
            # Idle, it polls at the idle pace; just woken, its last look was at that pace.
            interval = max(interval, self.pace.idle_seconds)
        if isinstance(interval, int | float) and quiet > interval + self.stall_seconds:
            return quiet
        return None

    def health(self) -> tuple[bool, str]:
        """Whether collection runs (the loop ticks) and every feed has handed
        over its first full look."""
        beat = self._beat
        if beat is None or time.monotonic() - beat > 3 * self.tick_seconds + 5:
            return False, "collection is not running"
        with self._guard:
            waiting = [feed.name for _, feed in self._feeds if feed.name not in self._reported]
        if waiting:
            return False, "starting: waiting for " + ", ".join(waiting)
        return True, self._down_words()

    def _down_words(self) -> str:
        """`ok`, and the sources that are down by name: serve is up and ready
        (readiness is not theirs to take away), and says so of those it cannot
        see through, as lockwatch_source_up does."""
        now = self.clock.now()
        with self.reading(now) as board:
            down = [
                f"{status.kind}:{status.name} ({status.state}: {status.reason or '?'})"
                for status in self.statuses(board, now)
                if status.state not in LIVE_STATES
            ]
        if not down:
            return "ok"
        shown = "; ".join(terminal_safe(words)[:300] for words in down[:5])
        more = f"; and {len(down) - 5} more" if len(down) > 5 else ""
        return f"ok; down: {shown}{more}"
