"""Episodes as the JSON contract (`lockwatch history --json`, `/v1/history`) and
as lines for the terminal (the CLI sanitises what it prints)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lockwatch.model.history import Episode, EpisodeWaiter, Who
from lockwatch.model.humanize import duration
from lockwatch.model.timestamps import format_timestamp


def _time(at: datetime | None) -> str | None:
    return None if at is None else format_timestamp(at, precise=False)


def who_json(who: Who, at: datetime | None = None) -> dict[str, Any]:
    age = None
    if who.since is not None and at is not None:
        age = round(max(0.0, (at - who.since).total_seconds()), 3)
    return {
        "node": who.node,
        "pid": who.pid,
        "application": who.application,
        "user": who.user,
        "state": who.state,
        "query": who.query,
        "transaction_age_seconds": age,
        "lock_id": who.lock_id,
    }


def waiter_json(waiter: EpisodeWaiter) -> dict[str, Any]:
    return {
        "node": waiter.node,
        "pid": waiter.pid,
        "application": waiter.application,
        "start": _time(waiter.start),
        "end": _time(waiter.end),
        "outcome": waiter.outcome,
    }


def episode_json(episode: Episode) -> dict[str, Any]:
    """Issue 44's item 2, field for field; times RFC 3339 (UTC)."""
    return {
        "id": episode.id,
        "source": episode.source,
        "server": episode.server,
        "resource": episode.resource,
        "start": _time(episode.start),
        "end": _time(episode.end),
        "blocker": who_json(episode.blocker, episode.start),
        "waiters": [waiter_json(waiter) for waiter in episode.waiters],
        "peak_waiters": episode.peak_waiters,
        "longest_wait_seconds": round(episode.longest_wait_seconds, 3),
        "waiter_seconds": round(episode.waiter_seconds, 3),
        "ended_by": episode.ended_by,
        "audit_id": episode.audit_id,
        "host": episode.host,
        "state": episode.state,
        "origins": list(episode.origins),
    }


def blocker_words(who: Who, at: datetime | None = None) -> str:
    """ "pid 4242 (billing-api, idle in transaction 7m)"."""
    head = f"pid {who.pid}" if who.pid is not None else who.node
    about = [part for part in (who.application,) if part]
    if who.state:
        age = ""
        if who.since is not None and at is not None:
            age = " " + duration(max(0.0, (at - who.since).total_seconds()))
        about.append(who.state + age)
    return f"{head} ({', '.join(about)})" if about else head


def clock(at: datetime | None) -> str:
    return "…" if at is None else at.astimezone().strftime("%H:%M:%S")


def ending_words(episode: Episode) -> str:
    if episode.ended_by is None:
        return "still going on"
    if episode.ended_by == "broken":
        who = f" by {episode.operator}" if episode.operator else ""
        audit = f" (audit #{episode.audit_id})" if episode.audit_id is not None else ""
        return f"broken{who}{audit}"
    return episode.ended_by.replace("_", " ")


def summary_line(episode: Episode) -> str:
    """One line: "deploy.lock stale 02:10-02:55, broken by ops (audit #41)" or
    "pid 4242 (…) blocked 37 on relation jobs 03:11-03:19, released"."""
    span = f"{clock(episode.start)}-{clock(episode.end)}"
    if episode.state is not None:
        return f"{episode.resource} {episode.state} {span}, {ending_words(episode)}"
    waiters = len(episode.waiters)
    return (
        f"{blocker_words(episode.blocker, episode.start)} blocked {waiters}"
        f" waiter{'s' if waiters != 1 else ''} on {episode.resource} {span},"
        f" {ending_words(episode)}"
    )
