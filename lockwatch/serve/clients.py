"""Clients that go wrong, counted and told in one line now and then.

A client that closes early, resets, misses a deadline or speaks something
other than HTTP is no fault of lockwatch's: thousands of them (a port scanner,
a load balancer's probes, an attack) must neither flood stderr nor each cost a
traceback. Each is counted by reason, for `lockwatch_serve_client_errors_total`,
and stderr gets at most one line every `every` seconds saying how many since
the last one.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

# Why a connection ended badly; a fixed set, so the metric's series are too.
CLOSED_EARLY = "closed_early"  # went away in the middle of a request
RESET = "reset"  # the connection was reset, or written to after it closed
TIMEOUT = "timeout"  # missed a deadline: its request's headers, or reading our answer
BAD_REQUEST = "bad_request"  # not HTTP we answer (answered 400, 431, 501)
EVICTED = "evicted"  # closed to make room: the most connections were open
REASONS = (CLOSED_EARLY, RESET, TIMEOUT, BAD_REQUEST, EVICTED)
WORDS = {
    CLOSED_EARLY: "closed early",
    RESET: "reset",
    TIMEOUT: "too slow",
    BAD_REQUEST: "not HTTP we answer",
    EVICTED: "dropped to make room",
}

EVERY_SECONDS = 10.0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ClientErrors:
    """The counts since start (for the metric), and since the last line (for stderr)."""

    def __init__(
        self,
        *,
        every: float = EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] = _stderr,
    ) -> None:
        self.every = every
        self._clock = clock
        self._say = say
        self._guard = threading.Lock()
        self.totals = dict.fromkeys(REASONS, 0)
        self._since = dict.fromkeys(REASONS, 0)
        self._said_at: float | None = None
        self._notes: dict[str, int] = {}
        self.open_connections = 0

    def count(self, reason: str) -> None:
        with self._guard:
            self.totals[reason] += 1
            self._since[reason] += 1
        self.flush()

    def note(self, what: str) -> None:
        """A trouble of the listener's own (the accept loop out of file
        descriptors, say): told on the same schedule, once per kind."""
        with self._guard:
            self._notes[what] = self._notes.get(what, 0) + 1
        self.flush()

    def flush(self) -> None:
        """Say what was counted since the last line, unless that line is too recent."""
        with self._guard:
            now = self._clock()
            if self._said_at is not None and now - self._said_at < self.every:
                return
            lines = self._lines(now)
            if lines:
                self._said_at = now
        for line in lines:
            self._say(line)

    def _lines(self, now: float) -> list[str]:
        lines = []
        counted = sum(self._since.values())
        if counted:
            parts = ", ".join(
                f"{count} {WORDS[reason]}" for reason, count in self._since.items() if count
            )
            when = (
                "so far"
                if self._said_at is None
                else f"in the last {max(self.every, now - self._said_at):.0f} s"
            )
            noun = "client connection" if counted == 1 else "client connections"
            lines.append(
                f"lockwatch serve: {counted} {noun} ended badly {when} ({parts});"
                " counted in lockwatch_serve_client_errors_total"
            )
            self._since = dict.fromkeys(REASONS, 0)
        for what, times in self._notes.items():
            lines.append(f"lockwatch serve: {what}" + (f" ({times} times)" if times > 1 else ""))
        self._notes = {}
        return lines


class ListenerCollector:
    """prometheus-client's collector for the listener's own figures."""

    def __init__(self, errors: ClientErrors) -> None:
        self.errors = errors

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        counted = CounterMetricFamily(
            "lockwatch_serve_client_errors",
            "Client connections that ended badly, by reason (closed_early, reset, timeout,"
            " bad_request, evicted).",
            labels=["reason"],
        )
        for reason, count in self.errors.totals.items():
            counted.add_metric([reason], count)
        yield counted
        yield GaugeMetricFamily(
            "lockwatch_serve_connections",
            "Client connections open now.",
            value=self.errors.open_connections,
        )
