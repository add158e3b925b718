"""Episodes from intervals: who blocked whom, from when to when (issue 44, item 2).

An episode is one root blocker and everyone who waited behind it, directly or
through a queue (a waiter that others wait on counts them behind its own root),
from the first wait to the last; a gap shorter than two of the recorder's polls
does not split it (a waiter seen again after one missed poll is the same stall).
A lock that was stale or invalid with nobody waiting leaves an episode too: its
trail ("deploy.lock stale 02:10-02:55, broken by ops at 02:56, audit #41").

Pure: spans in, episodes out; `now` ends what still lasts for the sums.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from lockwatch.model.history import (
    BROKEN,
    DEADLOCK,
    GONE,
    HOLDER_DIED,
    RELEASED,
    TIMEOUT,
    WAITERS_GAVE_UP,
    ActionMark,
    Episode,
    EpisodeWaiter,
    LockSpan,
    WaitSpan,
    Who,
)

# Lock states whose spans leave a trail when nobody waits.
TRAIL_STATES = frozenset({"stale", "invalid"})
GAVE_UP = frozenset({TIMEOUT, "cancelled", GONE})
# An action this close to an episode's end (after the poll that saw it end) ended it.
ACTION_SLACK = timedelta(seconds=2)
# Where no poll interval is known (spans from a log only): only touching spans join.
NO_GAP = timedelta(0)
# Reason codes that say a lock's holder is gone (or its claim lapsed, so that its
# own library lets another take it) when the caller names none: a lock file's
# dead pid. The store's reader passes every source's (`holder_gone` of each
# registry entry: an expired ZooKeeper session, a Lease nobody renews, ...).
HOLDER_GONE = frozenset({"holder_dead"})

Span = tuple[datetime, datetime | None]


def episode_id(host: str, server: str, root: str, start: datetime) -> str:
    """A stable id: the same episode has the same id in every query."""
    key = f"{host}|{server}|{root}|{start.timestamp():.3f}".encode()
    return hashlib.sha256(key).hexdigest()[:12]


def _covers(span: WaitSpan, at: datetime) -> bool:
    return span.start <= at and (span.end is None or span.end > at)


def _root(span: WaitSpan, waits_of: Mapping[str, list[WaitSpan]]) -> tuple[str, bool]:
    """The root blocker behind `span` at its start, and whether the chain loops."""
    node = span.blocker.node
    seen = {span.waiter.node}
    while node not in seen:
        seen.add(node)
        onward = next((s for s in waits_of.get(node, ()) if _covers(s, span.start)), None)
        if onward is None:
            return node, False
        node = onward.blocker.node
    # A cycle: it closes at the node seen again (in a cycle of two, the waiter of
    # the later edge, which the earlier edge's chain ended at too).
    return node, True


def _cycle_names(spans: Sequence[WaitSpan]) -> dict[str, str]:
    """Each node of a wait-for cycle (edges marked `cycle`) named by its cycle's
    least node: the nodes joined by cycle edges, one name each (union-find)."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for span in spans:
        if span.cycle:
            a, b = find(span.waiter.node), find(span.blocker.node)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {node: find(node) for node in list(parent)}


def _clusters(spans: list[WaitSpan], gap: timedelta) -> list[list[WaitSpan]]:
    spans.sort(key=lambda s: s.start)
    clusters: list[list[WaitSpan]] = []
    end: datetime | None = None
    for span in spans:
        if clusters and (end is None or span.start <= end + gap):
            clusters[-1].append(span)
            end = None if end is None or span.end is None else max(end, span.end)
            continue
        clusters.append([span])
        end = span.end
    return clusters


def _union(spans: Iterable[Span], now: datetime) -> list[tuple[datetime, datetime]]:
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted((s, e or now) for s, e in spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _peak(intervals: Iterable[tuple[datetime, datetime]]) -> int:
    points = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals],
        key=lambda p: (p[0], p[1]),
    )
    peak = current = 0
    for _, step in points:
        current += step
        peak = max(peak, current)
    return peak


def _waiters(
    cluster: list[WaitSpan], now: datetime
) -> tuple[list[EpisodeWaiter], list[float], int]:
    by_node: dict[str, list[WaitSpan]] = defaultdict(list)
    for span in cluster:
        by_node[span.waiter.node].append(span)
    waiters, seconds, every = [], [], []
    for node, spans in by_node.items():
        open_ = any(s.end is None for s in spans)
        # The span that ended last says how the wait ended (of two ending at one
        # poll, the one that says how: a queue that moved leaves None).
        last = max(spans, key=lambda s: (s.end is None, s.end or now, s.outcome is not None))
        first = min(spans, key=lambda s: s.start)
        union = _union(((s.start, s.end) for s in spans), now)
        every.extend(union)
        seconds.append(sum((e - s).total_seconds() for s, e in union))
        waiters.append(
            EpisodeWaiter(
                node,
                first.waiter.pid,
                first.waiter.application,
                first.start,
                None if open_ else last.end,
                None if open_ else (DEADLOCK if last.cycle else last.outcome),
            )
        )
    waiters.sort(key=lambda w: (w.start, w.node))
    return waiters, seconds, _peak(every)


def _action(
    lock_id: str | None,
    host: str,
    end: datetime | None,
    actions: Sequence[ActionMark],
    node: str | None = None,
) -> ActionMark | None:
    """The successful action on the lock (or on its holder's session) that
    ended what ended at `end`."""
    if end is None:
        return None
    for mark in actions:
        hit = (lock_id is not None and mark.lock_id == lock_id) or (
            node is not None and mark.node == node
        )
        if (
            hit
            and mark.host == host
            and mark.result == "success"
            and end - ACTION_SLACK - timedelta(seconds=30) <= mark.at <= end + ACTION_SLACK
        ):
            return mark
    return None


def _ending(
    cluster: list[WaitSpan],
    waiters: list[EpisodeWaiter],
    end: datetime | None,
    mark: ActionMark | None,
    died: bool,
) -> str | None:
    if end is None:
        return None
    if mark is not None:
        return BROKEN
    if any(span.cycle or span.outcome == DEADLOCK for span in cluster):
        return DEADLOCK
    if died:
        return HOLDER_DIED
    if waiters and all(w.outcome in GAVE_UP for w in waiters):
        return WAITERS_GAVE_UP
    return RELEASED


def _blocker(root: str, cluster: list[WaitSpan]) -> tuple[Who, str]:
    direct = [span for span in cluster if span.blocker.node == root] or cluster
    resource = Counter(span.resource for span in direct).most_common(1)[0][0]
    return direct[0].blocker if direct[0].blocker.node == root else Who(root), resource


def _wait_episode(
    key: tuple[str, str, str],
    cluster: list[WaitSpan],
    actions: Sequence[ActionMark],
    deaths: Mapping[tuple[str, str], list[LockSpan]],
    now: datetime,
) -> Episode:
    host, server, root = key
    start = min(span.start for span in cluster)
    end = None if any(s.end is None for s in cluster) else max(s.end or now for s in cluster)
    blocker, resource = _blocker(root, cluster)
    waiters, seconds, peak = _waiters(cluster, now)
    mark = _action(blocker.lock_id, host, end, actions, root)
    died = end is not None and any(
        span.start <= end and (span.end is None or span.end >= end - ACTION_SLACK)
        for span in deaths.get((host, blocker.lock_id or ""), ())
    )
    return Episode(
        id=episode_id(host, server, root, start),
        host=host,
        source=cluster[0].source,
        server=server,
        resource=resource,
        start=start,
        end=end,
        blocker=blocker,
        waiters=tuple(waiters),
        peak_waiters=peak,
        longest_wait_seconds=max(seconds, default=0.0),
        waiter_seconds=sum(seconds),
        ended_by=_ending(cluster, waiters, end, mark, died),
        audit_id=None if mark is None else mark.audit_id,
        operator=None if mark is None else mark.operator,
        origins=tuple(sorted({span.origin for span in cluster})),
    )


def _trails(
    problems: Sequence[LockSpan],
    actions: Sequence[ActionMark],
    now: datetime,
    gone: frozenset[str],
    told: Mapping[tuple[str, str], list[datetime | None]],
) -> list[Episode]:
    """The trails of `problems`; `told[host, lock_id]`: the ends of the wait
    episodes that lock was the root blocker of (a trail that ended with one is
    that episode's own ending, told there: a stale Lease its candidate took)."""
    by_lock: dict[tuple[str, str], list[LockSpan]] = defaultdict(list)
    for span in problems:
        by_lock[span.host, span.lock_id].append(span)
    found = []
    for (host, lock_id), spans in by_lock.items():
        spans.sort(key=lambda s: s.start)
        runs: list[list[LockSpan]] = []
        for span in spans:
            last = runs[-1][-1] if runs else None
            if (
                last is not None
                and last.state == span.state
                and (last.end is None or span.start <= last.end)
            ):
                runs[-1].append(span)
            else:
                runs.append([span])
        for run in runs:
            first = run[0]
            end = None if any(s.end is None for s in run) else max(s.end or now for s in run)
            if any(_same_end(end, other) for other in told.get((host, lock_id), ())):
                continue
            mark = _action(lock_id, host, end, actions)
            died = any(not gone.isdisjoint(s.reasons) for s in run)
            ending = None if end is None else BROKEN if mark else HOLDER_DIED if died else RELEASED
            found.append(
                Episode(
                    id=episode_id(host, first.place, lock_id, first.start),
                    host=host,
                    source=first.source,
                    server=first.place,
                    resource=first.name,
                    start=first.start,
                    end=end,
                    blocker=Who(first.holder, application=first.holder or None, lock_id=lock_id),
                    waiters=(),
                    peak_waiters=0,
                    longest_wait_seconds=0.0,
                    waiter_seconds=0.0,
                    ended_by=ending,
                    audit_id=None if mark is None else mark.audit_id,
                    operator=None if mark is None else mark.operator,
                    state=first.state,
                )
            )
    return found


def _same_end(one: datetime | None, other: datetime | None) -> bool:
    if one is None or other is None:
        return one is other
    return abs(one - other) <= ACTION_SLACK


def fold(
    waits: Sequence[WaitSpan],
    problems: Sequence[LockSpan],
    actions: Sequence[ActionMark],
    polls: Mapping[str, float],
    now: datetime | None = None,
    holder_gone: Collection[str] = HOLDER_GONE,
) -> list[Episode]:
    """Episodes of `waits` (wait spans, any origin) and the trails of
    `problems` (lock spans in TRAIL_STATES); `actions` tie endings to audit
    records; `polls[host]` is that host's poll interval in seconds;
    `holder_gone`: the reason codes that say a lock's holder is gone (a
    blocker's lock in such a state when its episode ended: `holder_died`)."""
    gone = frozenset(holder_gone)
    if now is None:
        ends = [s.end for s in waits if s.end] + [s.end for s in problems if s.end]
        starts = [s.start for s in waits] + [s.start for s in problems]
        now = max([*ends, *starts], default=datetime.min)
    by_group: dict[tuple[str, str], list[WaitSpan]] = defaultdict(list)
    for span in waits:
        by_group[span.host, span.server].append(span)
    by_root: dict[tuple[str, str, str], list[WaitSpan]] = defaultdict(list)
    for (host, server), spans in by_group.items():
        waits_of: dict[str, list[WaitSpan]] = defaultdict(list)
        for span in spans:
            waits_of[span.waiter.node].append(span)
        cycles = _cycle_names(spans)
        for span in spans:
            root, looped = _root(span, waits_of)
            if span.cycle or looped:
                # Every edge of one wait-for cycle under one name, however the
                # polls first saw its edges (together, or one after the other).
                root = cycles.get(root, root)
            by_root[host, server, root].append(span)
    deaths: dict[tuple[str, str], list[LockSpan]] = defaultdict(list)
    for problem in problems:
        if not gone.isdisjoint(problem.reasons):
            deaths[problem.host, problem.lock_id].append(problem)
    found = []
    for key, spans in by_root.items():
        gap = timedelta(seconds=2 * polls.get(key[0], 0.0)) if polls.get(key[0]) else NO_GAP
        for cluster in _clusters(spans, gap):
            found.append(_wait_episode(key, cluster, actions, deaths, now))
    told: dict[tuple[str, str], list[datetime | None]] = defaultdict(list)
    for episode in found:
        if episode.blocker.lock_id is not None:
            told[episode.host, episode.blocker.lock_id].append(episode.end)
    found.extend(_trails(problems, actions, now, gone, told))
    return found


def worst_first(episodes: Iterable[Episode]) -> list[Episode]:
    """Most waiter-seconds first; then the longest lasting; then the latest."""

    def key(episode: Episode) -> tuple[float, float, float]:
        lasted = ((episode.end or episode.start) - episode.start).total_seconds()
        return (-episode.waiter_seconds, -lasted, -episode.start.timestamp())

    return sorted(episodes, key=key)
