"""What the event watcher and the poller hand the file feed: paths, and how each
changed. Both hand the same thing, so the feed reads what changed one way."""

from __future__ import annotations

import enum


class Change(enum.Enum):
    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"


# Every way a path changed since the feed last looked, by path.
Changes = dict[str, set[Change]]


def merge(into: Changes, more: Changes) -> None:
    for path, kinds in more.items():
        into.setdefault(path, set()).update(kinds)


def pace(cost_seconds: float, floor_seconds: float, share: float) -> float:
    """How long to wait after a pass that took `cost_seconds`, so that passes take
    at most `share` of a core (and never come closer than `floor_seconds`)."""
    return max(floor_seconds, cost_seconds * (1.0 - share) / share)
