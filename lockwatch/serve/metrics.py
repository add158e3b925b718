"""The Board as Prometheus metrics, computed at each scrape from what the
feeds keep up to date (a scrape reads no file and asks no server).

Cardinality is bounded by what the operator configured, never by how many
locks there are, except for one family, which is capped:

- lockwatch_locks, lockwatch_lock_oldest_age_seconds {source,state}: sources x 6
  states;
- lockwatch_lock_stale, lockwatch_lock_age_seconds {source,format,name}: stale
  locks only, at most --max-lock-series (the oldest first), and
  lockwatch_lock_series_dropped counts the rest;
- lockwatch_pg_* {server}: one per PostgreSQL server;
- a source's own gauges per lock (`Facts.series`: lockwatch_k8s_lease_transitions
  {server,name}, ...): at most --max-lock-series of each;
- lockwatch_source_up, lockwatch_source_last_success_timestamp_seconds
  {source,name}: one per PATH, server and remote;
- lockwatch_collect_duration_seconds, lockwatch_scan_errors {source}: one per source.

Label values are what the operator sees elsewhere, through the one sanitiser:
no control or invisible character of a hostile file name reaches an alert.
Locks of other hosts (--remote) are theirs to export: a serve exports only the
locks it collects itself.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch import __version__
from lockwatch.model import blocking
from lockwatch.model.board import Board
from lockwatch.model.facts import Series
from lockwatch.model.status import LIVE_STATES, SourceStatus
from lockwatch.model.text import terminal_safe
from lockwatch.model.verdict import State
from lockwatch.sources import registry

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from lockwatch.serve.watcher import Watcher

_STALE = State.STALE


@dataclass
class ServerWaits:
    blocked: set[Hashable] = field(default_factory=set)
    longest_wait: float = 0.0
    roots: int = 0
    most_blocked: int = 0


@dataclass
class Figures:
    """What one scrape reports."""

    locks: dict[tuple[str, str], int] = field(default_factory=dict)
    oldest: dict[tuple[str, str], float] = field(default_factory=dict)
    # ((source, format, name), age or None): the stale locks that get series.
    stale: list[tuple[tuple[str, str, str], float | None]] = field(default_factory=list)
    dropped: int = 0
    # Per database server, as (source, server): who waits, how long, and the
    # blocking trees' roots.
    servers: dict[tuple[str, str], ServerWaits] = field(default_factory=dict)
    up: list[tuple[str, str, int]] = field(default_factory=list)
    last_success: list[tuple[str, str, float]] = field(default_factory=list)
    durations: dict[str, float] = field(default_factory=dict)
    scan_errors: dict[str, int] = field(default_factory=dict)
    # A source's own gauges (`Facts.series`): metric -> (help, [(labels, value)]).
    own: dict[str, tuple[str, list[tuple[tuple[str, str], float]]]] = field(default_factory=dict)


@dataclass
class Tally:
    """What the locks say, whatever the time: counted again only after the board
    changed (`generation`), so a scrape of an unchanged board costs what its
    series cost, not what its locks do."""

    generation: int = -1
    counts: dict[tuple[str, State], int] = field(default_factory=dict)
    # The oldest start per (source, state), and per stale series (source, format,
    # name) its oldest lock's start: ages are taken from them at each scrape.
    first: dict[tuple[str, State], datetime] = field(default_factory=dict)
    stale: dict[tuple[str, str, str], datetime | None] = field(default_factory=dict)
    # Per database server, as (source, server): the sessions waiting, and since
    # when the first waits.
    blocked: dict[tuple[str, str], set[Hashable]] = field(default_factory=dict)
    first_wait: dict[tuple[str, str], datetime] = field(default_factory=dict)
    # Per (source, server): the blocking tree its locks are in (the board's trees
    # go by each lock's group, which a source may name apart from its label).
    tree_of: dict[tuple[str, str], str | None] = field(default_factory=dict)
    # Sources' own gauges, with the lock's name each is for.
    own: list[tuple[Series, str]] = field(default_factory=list)


def tally(board: Board) -> Tally:
    out = Tally(board.generation)
    # Keyed by the State itself: its .value costs a lookup per lock.
    counts, first, stale = out.counts, out.first, out.stale
    conflicted = board.conflicts()
    for lock_id, entry in board.entries.items():
        lock = entry.lock
        facts = lock.facts
        if facts is not None and facts.remote_host() is not None:
            continue
        # Scope conflicts add a reason, never change a state: the entry's state is it.
        state = entry.verdict.state if not conflicted else board.verdict(lock_id).state
        key = (lock.source, state)
        counts[key] = counts.get(key, 0) + 1
        start = lock.acquired_at
        if facts is not None:
            # A waiter's age is how long it has waited.
            waiting = facts.waiting_since(lock)
            if waiting is not None:
                start = waiting
            server = facts.wait_metrics_server()
            if server is not None:
                where = (lock.source, server)
                _count_wait(out, where, facts.waits(), waiting)
                if where not in out.tree_of:
                    out.tree_of[where] = blocking.group(lock)
            out.own.extend((each, lock.name) for each in facts.series(lock))
        if start is not None:
            known = first.get(key)
            if known is None or start < known:
                first[key] = start
        if state is _STALE:
            labels = (lock.source, lock.format, lock.name)
            if labels not in stale:
                stale[labels] = start
            else:
                other = stale[labels]
                if other is None or (start is not None and start < other):
                    stale[labels] = start
    return out


def _count_wait(
    out: Tally,
    server: tuple[str, str],
    waits: tuple[Hashable, tuple[Hashable, ...]] | None,
    since: datetime | None,
) -> None:
    """A lock of `server`'s wait series: its session, if it waits, and since when."""
    blocked = out.blocked.get(server)
    if blocked is None:
        blocked = out.blocked[server] = set()
    if waits is not None:
        blocked.add(waits[0])
    if since is not None:
        known = out.first_wait.get(server)
        if known is None or since < known:
            out.first_wait[server] = since


def figures(
    board: Board,
    now: datetime,
    *,
    sources: Iterable[str] = (),
    max_series: int = 500,
    durations: Mapping[str, float] | None = None,
    last_success: Mapping[tuple[str, str], datetime] | None = None,
    counted: Tally | None = None,
    statuses: Sequence[SourceStatus] | None = None,
) -> Figures:
    """Everything a scrape reports, from the board as it is at `now` (`counted`:
    its tally, if known). `sources`: the sources running (their counts are there
    even at zero). `statuses`: every configured source's, if not the board's
    (the watcher's: one for a source that has not answered yet, too)."""
    if counted is None or counted.generation != board.generation:
        counted = tally(board)
    out = Figures()
    for source in sources:
        if not registry.foreign(source):
            for state in State:
                out.locks[(source, state.value)] = 0
    for (source, state), count in counted.counts.items():
        out.locks[(source, state.value)] = count
    for (source, state), start in counted.first.items():
        out.oldest[(source, state.value)] = max(0.0, (now - start).total_seconds())
    _stale_series(out, counted.stale, now, max_series)
    _own_series(out, counted.own, now, max_series)
    servers = out.servers
    for key, blocked in counted.blocked.items():
        since = counted.first_wait.get(key)
        waited = 0.0 if since is None else max(0.0, (now - since).total_seconds())
        servers[key] = ServerWaits(set(blocked), waited)

    if statuses is None:
        statuses = board.all_statuses()
    for status in statuses:
        label = _wait_label(status)
        if label is not None:
            servers.setdefault((status.kind, label), ServerWaits())
    trees = board.blocking_trees()
    for key, server_figures in servers.items():
        group = counted.tree_of.get(key)
        tree = None if group is None else trees.get(group)
        if tree is not None:
            server_figures.roots = len(tree.roots)
            server_figures.most_blocked = max((root.total for root in tree.roots), default=0)
    for status in statuses:
        name = terminal_safe(status.name)
        out.up.append((status.kind, name, 1 if status.state in LIVE_STATES else 0))
    for (kind, name), at in (last_success or {}).items():
        out.last_success.append((kind, terminal_safe(name), at.timestamp()))
    out.durations = dict(durations or {})
    for feed, errors in board.errors.items():
        if errors:
            # Unreadable places come from lock-file trees: say whose.
            kind = next((s.kind for s in board.statuses.get(feed, ())), feed)
            out.scan_errors[kind] = out.scan_errors.get(kind, 0) + len(errors)
    return out


def _stale_series(
    out: Figures,
    stale: dict[tuple[str, str, str], datetime | None],
    now: datetime,
    cap: int,
) -> None:
    """One series per (source, format, name) (locks alike in all three share it,
    with the oldest's age), the oldest first, at most `cap`; the rest counted."""
    oldest = heapq.nsmallest(cap, stale.items(), key=lambda item: (item[1] is None, item[1] or now))
    shown: set[tuple[str, str, str]] = set()
    for (source, kind, name), start in oldest:
        labels = (source, kind, terminal_safe(name))
        if labels in shown:
            continue  # two names that read alike once escaped: one series
        shown.add(labels)
        age = None if start is None else max(0.0, (now - start).total_seconds())
        out.stale.append((labels, age))
    out.dropped = len(stale) - len(out.stale)


def _own_series(out: Figures, own: list[tuple[Series, str]], now: datetime, cap: int) -> None:
    """Each source's own gauges, at most `cap` of each metric (by server and name),
    one sample per labels (the first): two would be a duplicate Prometheus rejects."""
    shown: set[tuple[str, str, str]] = set()
    for each, name in sorted(own, key=lambda item: (item[0].metric, item[0].server, item[1])):
        if each.value is not None:
            value = each.value
        elif each.since is not None:
            value = max(0.0, (now - each.since).total_seconds())
        else:
            continue
        labels = (terminal_safe(each.server), terminal_safe(name))
        if (each.metric, *labels) in shown:
            continue
        shown.add((each.metric, *labels))
        _, samples = out.own.setdefault(each.metric, (each.help, []))
        if len(samples) < cap:
            samples.append((labels, value))


def _wait_prefix(source: str) -> str | None:
    found = registry.by_name(source)
    return None if found is None else found.wait_metrics


def _wait_label(status: SourceStatus) -> str | None:
    """The `server` label a status's wait series go by: the one its locks'
    `wait_metrics_server()` give (None: its source has none), so that a server
    with waiters and without has one series, not two."""
    found = registry.by_name(status.kind)
    if found is None or found.wait_metrics is None:
        return None
    return f"{status.kind}:{status.name}" if found.wait_label_prefixed else status.name


def _wait_families(prefix: str, servers: list[tuple[str, ServerWaits]]) -> Iterator[Metric]:
    """One source's per-server wait series: `lockwatch_pg_blocked_sessions`, …"""
    from prometheus_client.core import GaugeMetricFamily

    blocked = GaugeMetricFamily(
        f"lockwatch_{prefix}_blocked_sessions", "Sessions waiting on a lock.", labels=["server"]
    )
    longest = GaugeMetricFamily(
        f"lockwatch_{prefix}_longest_wait_seconds",
        "How long the longest waiting session has waited (0: none waits).",
        labels=["server"],
    )
    roots = GaugeMetricFamily(
        f"lockwatch_{prefix}_root_blockers",
        "Blockers that wait on nobody while others wait on them.",
        labels=["server"],
    )
    most = GaugeMetricFamily(
        f"lockwatch_{prefix}_root_blocker_max_blocked_sessions",
        "The most sessions one root blocker holds up, directly or down its chain.",
        labels=["server"],
    )
    for server, waits in servers:
        label = [terminal_safe(server)]
        blocked.add_metric(label, len(waits.blocked))
        longest.add_metric(label, waits.longest_wait)
        roots.add_metric(label, waits.roots)
        most.add_metric(label, waits.most_blocked)
    yield from (blocked, longest, roots, most)


def families(found: Figures) -> Iterator[Metric]:
    yield from _lock_families(found)
    yield from _server_wait_families(found)
    yield from _source_families(found)


def _lock_families(found: Figures) -> Iterator[Metric]:
    """Locks counted by source and state, the oldest's age, the stale ones each."""
    from prometheus_client.core import GaugeMetricFamily

    locks = GaugeMetricFamily(
        "lockwatch_locks", "Locks by source and state.", labels=["source", "state"]
    )
    for (source, state), count in sorted(found.locks.items()):
        locks.add_metric([source, state], count)
    yield locks

    oldest = GaugeMetricFamily(
        "lockwatch_lock_oldest_age_seconds",
        "Age of the oldest lock by source and state (waiting Postgres rows: how long they"
        " have waited).",
        labels=["source", "state"],
    )
    for (source, state), seconds in sorted(found.oldest.items()):
        oldest.add_metric([source, state], seconds)
    yield oldest

    stale = GaugeMetricFamily(
        "lockwatch_lock_stale",
        "1 for each stale lock (series only while it is stale; at most --max-lock-series).",
        labels=["source", "format", "name"],
    )
    ages = GaugeMetricFamily(
        "lockwatch_lock_age_seconds",
        "Age of each stale lock that has a lockwatch_lock_stale series.",
        labels=["source", "format", "name"],
    )
    for labels, age in found.stale:
        stale.add_metric(list(labels), 1)
        if age is not None:
            ages.add_metric(list(labels), age)
    yield stale
    yield ages
    yield GaugeMetricFamily(
        "lockwatch_lock_series_dropped",
        "Stale locks left without series of their own by --max-lock-series.",
        value=found.dropped,
    )


def _server_wait_families(found: Figures) -> Iterator[Metric]:
    """Each server source's wait families, then the families sources add of their own."""
    from prometheus_client.core import GaugeMetricFamily

    # Every family a source has, with or without servers in view (as before any poll).
    by_prefix: dict[str, list[tuple[str, ServerWaits]]] = {
        source.wait_metrics: [] for source in registry.SOURCES if source.wait_metrics is not None
    }
    for (source, server), waits in sorted(found.servers.items()):
        prefix = _wait_prefix(source)
        if prefix is not None:
            by_prefix.setdefault(prefix, []).append((server, waits))
    for prefix, servers in sorted(by_prefix.items()):
        yield from _wait_families(prefix, servers)

    for metric, (text, samples) in sorted(found.own.items()):
        gauge = GaugeMetricFamily(metric, text, labels=["server", "name"])
        for (server, name), value in samples:
            gauge.add_metric([server, name], value)
        yield gauge


def _gauge(
    name: str, text: str, labels: list[str], samples: Iterable[tuple[Sequence[str], float]]
) -> Metric:
    """One gauge family: a sample for each (label values, value)."""
    from prometheus_client.core import GaugeMetricFamily

    gauge = GaugeMetricFamily(name, text, labels=labels)
    for values, value in samples:
        gauge.add_metric(list(values), value)
    return gauge


def _source_families(found: Figures) -> Iterator[Metric]:
    """Each source's health: up, last success, collection time, errors; the build."""
    yield _gauge(
        "lockwatch_source_up",
        "1 while a source (a PATH, a server, a remote) answers, else 0.",
        ["source", "name"],
        (((kind, name), value) for kind, name, value in sorted(found.up)),
    )
    yield _gauge(
        "lockwatch_source_last_success_timestamp_seconds",
        "When a source last produced a good picture (Unix time).",
        ["source", "name"],
        (((kind, name), at) for kind, name, at in sorted(found.last_success)),
    )
    yield _gauge(
        "lockwatch_collect_duration_seconds",
        "How long a source's last collection took, from its start to its result in view.",
        ["source"],
        (((source,), seconds) for source, seconds in sorted(found.durations.items())),
    )
    yield _gauge(
        "lockwatch_scan_errors",
        "Places a source could not read.",
        ["source"],
        (((source,), count) for source, count in sorted(found.scan_errors.items())),
    )
    yield _gauge(
        "lockwatch_build_info", "The lockwatch version serving.", ["version"], [((__version__,), 1)]
    )


class BoardCollector:
    """prometheus-client's collector: the watcher's Board, read at each scrape."""

    def __init__(self, watcher: Watcher, *, max_series: int) -> None:
        self.watcher = watcher
        self.max_series = max_series
        self._tally: Tally | None = None

    def collect(self) -> Iterator[Metric]:
        watcher = self.watcher
        now = watcher.clock.now()
        with watcher.reading(now) as board:
            if self._tally is None or self._tally.generation != board.generation:
                self._tally = tally(board)
            found = figures(
                board,
                now,
                sources=watcher.sources,
                max_series=self.max_series,
                durations=watcher.durations,
                last_success=watcher.last_success,
                counted=self._tally,
                statuses=watcher.statuses(board, now),
            )
        yield from families(found)
        recorder = watcher.recorder
        if recorder is not None:
            from lockwatch.history.tally import families as wait_families

            yield from wait_families(recorder.tally, now, recorder.failed is None)
