"""Timestamp parsing shared by every decoder, and safe arithmetic on the result."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

# Epoch numbers above this are milliseconds (1e11 s is the year 5138).
_MILLIS_THRESHOLD = 1e11


def parse_timestamp(value: object) -> datetime | None:
    """ISO-8601 text (`Z`, an offset, or naive meaning UTC) or epoch seconds/ms.

    Returns an aware UTC datetime, or None when `value` is not a time.
    """
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 64:
            return None
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC)
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            return None
        if not math.isfinite(seconds) or seconds < 0:
            return None
        if seconds > _MILLIS_THRESHOLD:
            seconds /= 1000.0
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def seconds_since(at: datetime | None, now: datetime | None) -> float | None:
    """How long ago `at` was (0 if in the future), or None when either is unknown."""
    if at is None or now is None:
        return None
    return max(0.0, (now - at).total_seconds())


def plus_seconds(at: datetime, seconds: float) -> datetime | None:
    """`at + seconds`, or None when that falls outside what datetime can hold."""
    try:
        return at + timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        return None


def format_timestamp(at: datetime, *, precise: bool = True) -> str:
    """RFC 3339 in UTC with a `Z`: microseconds when `precise`, else whole seconds
    (what the seed formats write, e.g. tower-fleet's `2025-12-18T10:30:10Z`)."""
    utc = at.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if precise else "%Y-%m-%dT%H:%M:%SZ")
