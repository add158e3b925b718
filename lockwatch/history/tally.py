"""What `serve` counts of waits while it records (issue 44, item 5):
`lockwatch_lock_wait_seconds_total` and `lockwatch_wait_episodes_total` by
source and server, and the gauge `lockwatch_longest_wait_seconds`.

A waiter's wait runs from the first poll that saw it wait to the first that saw
it waiting no more (on anybody: a queue that moves is one wait); an episode
starts when a root blocker gets its first waiter, unless it had some less than
two polls ago (the episodes' own rule, model/episodes.py). Updated by the
recorder's writer thread, read by scrapes: one lock between them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lockwatch.history.spans import Edge, EdgeKey

if TYPE_CHECKING:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.metrics_core import Metric

Key = tuple[str, str]  # (source, server)


def _roots(edges: Mapping[EdgeKey, Edge]) -> dict[tuple[str, str], str]:
    """Each (server, root blocker) with waiters now, and its source."""
    waits_on: dict[tuple[str, str], str] = {}
    for server, waiter, blocker in edges:
        waits_on.setdefault((server, waiter), blocker)
    roots: dict[tuple[str, str], str] = {}
    for (server, _, blocker), edge in edges.items():
        node, seen = blocker, {blocker}
        while (server, node) in waits_on:
            node = waits_on[server, node]
            if node in seen:
                break
            seen.add(node)
        roots[server, node] = edge.source
    return roots


class WaitTally:
    def __init__(self, poll_seconds: float) -> None:
        self._guard = threading.Lock()
        self._gap = timedelta(seconds=2 * poll_seconds)
        self._seconds: dict[Key, float] = {}
        self._episodes: dict[Key, int] = {}
        # (server, waiter) -> (source, since): waiting now.
        self._waiting: dict[tuple[str, str], tuple[str, datetime]] = {}
        # Roots with waiters at the last update, and when others' waiters left.
        self._active: set[tuple[str, str]] = set()
        self._ended: dict[tuple[str, str], datetime] = {}

    def update(self, edges: Mapping[EdgeKey, Edge], at: datetime) -> None:
        """The wait edges as of `at` (the recorder's whole set after a change)."""
        now_waiting = {(edge.server, edge.waiter.node): edge.source for edge in edges.values()}
        roots = _roots(edges)
        with self._guard:
            for key, (source, since) in list(self._waiting.items()):
                if key not in now_waiting:
                    counted = (source, key[0])
                    seconds = max(0.0, (at - since).total_seconds())
                    self._seconds[counted] = self._seconds.get(counted, 0.0) + seconds
                    del self._waiting[key]
            for key, source in now_waiting.items():
                self._waiting.setdefault(key, (source, at))
            for key, source in roots.items():
                if key in self._active:
                    continue
                ended = self._ended.pop(key, None)
                if ended is None or at - ended > self._gap:
                    counted = (source, key[0])
                    self._episodes[counted] = self._episodes.get(counted, 0) + 1
            for key in self._active - roots.keys():
                self._ended[key] = at
            self._active = set(roots)
            for key, ended in list(self._ended.items()):
                if at - ended > self._gap:
                    del self._ended[key]

    def read(self, now: datetime) -> tuple[dict[Key, float], dict[Key, int], dict[Key, float]]:
        """(wait seconds so far, episodes so far, longest wait now), by (source, server)."""
        with self._guard:
            seconds = dict(self._seconds)
            longest: dict[Key, float] = {}
            for (server, _), (source, since) in self._waiting.items():
                waited = max(0.0, (now - since).total_seconds())
                key = (source, server)
                seconds[key] = seconds.get(key, 0.0) + waited
                longest[key] = max(longest.get(key, 0.0), waited)
            return seconds, dict(self._episodes), longest


def families(tally: WaitTally | None, now: datetime, recording: bool | None) -> Iterator[Metric]:
    """The metric families (prometheus-client's), for serve's collector."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    if recording is not None:
        up = GaugeMetricFamily(
            "lockwatch_history_recording",
            "1 while the lock history is being recorded; 0 once recording stopped"
            " (disk full, the file's max_mb, a database gone: serve's stderr says why)",
        )
        up.add_metric([], 1.0 if recording else 0.0)
        yield up
    if tally is None:
        return
    seconds, episodes, longest = tally.read(now)
    yield _by_server(
        CounterMetricFamily(
            "lockwatch_lock_wait_seconds",
            "Seconds sessions and processes spent waiting for locks, summed over waiters",
            labels=["source", "server"],
        ),
        seconds,
    )
    yield _by_server(
        CounterMetricFamily(
            "lockwatch_wait_episodes",
            "Wait episodes seen (a root blocker and everyone waiting behind it)",
            labels=["source", "server"],
        ),
        episodes,
    )
    yield _by_server(
        GaugeMetricFamily(
            "lockwatch_longest_wait_seconds",
            "The longest wait going on now, in seconds",
            labels=["source", "server"],
        ),
        longest,
    )


def _by_server(
    family: CounterMetricFamily | GaugeMetricFamily, values: Mapping[Key, float]
) -> Metric:
    """`family` with a sample per (source, server) of `values`, in order."""
    for (source, server), value in sorted(values.items()):
        family.add_metric([source, server], value)
    return family
