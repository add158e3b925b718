"""How often `serve` polls the kernel, Redis and etcd: at their own interval
while someone reads what it collects, at most every IDLE_SECONDS once nobody has
for IDLE_AFTER seconds.

Polling 20,000 kernel locks every second took 61 % of a core in a serve nobody
scraped. Collected for nobody, a poll is waste: idle, the feeds that take a
pace (those with a `sleep` attribute) wait longer between polls, and the first
request for data (/metrics, /v1/locks; not /healthz, which a prober asks every
few seconds and which needs no fresh data) wakes them at once and waits, a
little, for their fresh look. Time still re-judges the locks every tick: a lock
whose deadline passes turns stale on time, idle or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable

# The slowest pace: an idle serve's feeds poll at least this often.
IDLE_SECONDS = 30.0
# Nobody has asked for data this long: the serve is idle.
IDLE_AFTER = 120.0
# How long the first request after an idle spell waits for the fresh look.
WAKE_WAIT = 3.0


class Pace:
    def __init__(
        self,
        *,
        idle_seconds: float = IDLE_SECONDS,
        idle_after: float = IDLE_AFTER,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_seconds = idle_seconds
        self.idle_after = idle_after
        self._monotonic = monotonic
        self._asked: float | None = None  # when data was last asked for
        self._guard = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        # When the last idle spell ended: feeds heard from since are fresh.
        self.woken_at = monotonic()

    def idle(self) -> bool:
        with self._guard:
            asked = self._asked
        return asked is None or self._monotonic() - asked > self.idle_after

    def asked(self) -> bool:
        """Someone asked for data (any thread); whether it woke an idle serve."""
        was_idle = self.idle()
        now = self._monotonic()
        with self._guard:
            self._asked = now
        if was_idle:
            self.woken_at = now
            loop = self._loop
            if loop is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop has just ended
                    loop.call_soon_threadsafe(self._ring)
        return was_idle

    def _ring(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        if wake is not None:
            wake.set()

    def interval(self, seconds: float) -> float:
        """What `seconds` between polls is now: itself, or the idle pace."""
        return max(seconds, self.idle_seconds) if self.idle() else seconds

    async def sleep(self, seconds: float) -> bool:
        """A feed's wait between polls: `seconds`, or while idle up to the idle
        pace unless data is asked for first (then at least `seconds`). True when
        someone asking ended it: the feed's next look should be a full one."""
        if not self.idle():
            await asyncio.sleep(seconds)
            return False
        if self._wake is None or self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
        started = self._monotonic()
        try:
            async with asyncio.timeout(max(seconds, self.idle_seconds)):
                await self._wake.wait()
        except TimeoutError:
            return False
        rest = seconds - (self._monotonic() - started)
        if rest > 0:
            await asyncio.sleep(rest)
        return True

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the feeds sleep on (called on it)."""
        self._loop = loop
        self._wake = asyncio.Event()
