"""Rows of the history's tables to and from the model: times as float seconds
since the epoch (UTC), a lock span's as integer milliseconds, a blocker or
waiter (`Who`) as a small JSON object."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import orjson

from lockwatch.model.changes import Entry
from lockwatch.model.history import Who


def ts(at: datetime) -> float:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()


def ms(at: datetime) -> int:
    """A lock span's time as stored (schema version 4): integer milliseconds."""
    return round(ts(at) * 1000)


def dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def opt_dt(seconds: float | None) -> datetime | None:
    return None if seconds is None else dt(seconds)


def undigested(entry: Entry) -> Entry:
    """`entry` without its lock's file digest. A digest is what a break compares
    against the file as it is now; no action runs on a past state, and a new
    digest with every rewrite is 32 bytes a change that nothing packs: the
    history keeps none (and reads an older file's as none)."""
    if entry.lock.sha256 is None:
        return entry
    return dataclasses.replace(entry, lock=dataclasses.replace(entry.lock, sha256=None))


def who_json(who: Who) -> str:
    data = {
        "node": who.node,
        "pid": who.pid,
        "application": who.application,
        "user": who.user,
        "state": who.state,
        "query": who.query,
        "since": None if who.since is None else ts(who.since),
        "lock_id": who.lock_id,
    }
    return orjson.dumps({k: v for k, v in data.items() if v is not None}).decode()


def who_of(text: str) -> Who:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        data = {}
    if not isinstance(data, dict):
        data = {}

    def text_of(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    pid, since = data.get("pid"), data.get("since")
    return Who(
        node=text_of("node") or "?",
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        application=text_of("application"),
        user=text_of("user"),
        state=text_of("state"),
        query=text_of("query"),
        since=dt(since) if isinstance(since, int | float) and not isinstance(since, bool) else None,
        lock_id=text_of("lock_id"),
    )
