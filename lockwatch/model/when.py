"""Times an operator types: RFC 3339 (`2026-12-07T03:12:07Z`, an offset, or a
space for the T), `HH:MM[:SS]` (today, local time), and `-15m` / `-2h` / `-1d`
(`s` too: that long before now). Pure: `now` and the local zone are given."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta, tzinfo

from lockwatch.model.lazyre import lazy_compile

_CLOCK = lazy_compile(r"(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?")
_AGO = lazy_compile(r"-(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
FORMS = "RFC 3339 (2026-12-07T03:12:07Z), HH:MM[:SS] (today, local) or -15m/-2h/-1d"


class BadTime(ValueError):
    """Text that is no time: the message says what forms are."""


def parse_when(text: str, now: datetime, local: tzinfo | None = None) -> datetime:
    """`text` as an aware UTC datetime, against `now` (aware) and `local`
    (the zone `HH:MM` is read in; None: UTC). Raises BadTime."""
    said = text.strip()
    if len(said) > 64 or not said:
        raise BadTime(f"not a time: {said[:64]!r} (use {FORMS})")
    zone = local or UTC
    ago = _AGO.fullmatch(said)
    if ago is not None:
        return (now - timedelta(seconds=float(ago[1]) * _UNITS[ago[2]])).astimezone(UTC)
    clock = _CLOCK.fullmatch(said)
    if clock is not None:
        hour, minute, second = int(clock[1]), int(clock[2]), int(clock[3] or 0)
        micro = int((clock[4] or "0").ljust(6, "0"))
        if hour > 23 or minute > 59 or second > 59:
            raise BadTime(f"not a time of day: {said!r} (use {FORMS})")
        day = now.astimezone(zone).date()
        return datetime.combine(day, time(hour, minute, second, micro), zone).astimezone(UTC)
    try:
        parsed = datetime.fromisoformat(said.replace("z", "Z"))
    except ValueError:
        raise BadTime(f"not a time: {said!r} (use {FORMS})") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone)
    return parsed.astimezone(UTC)


def found_in(text: str, now: datetime, local: tzinfo | None = None) -> datetime | None:
    """The first timestamp in a pasted error text (a log line's
    `2026-12-07 03:12:07.123 UTC`, an RFC 3339 stamp), or None."""
    match = _STAMP.search(text)
    if match is None:
        return None
    stamp = match[1].replace(" ", "T")
    zone = match[2]
    if zone in ("UTC", "GMT", "Z"):
        stamp += "+00:00"
    elif zone:
        stamp += zone if ":" in zone or len(zone) != 5 else zone[:3] + ":" + zone[3:]
    try:
        return parse_when(stamp, now, local)
    except BadTime:
        return None


_STAMP = lazy_compile(
    r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)\s?(Z|UTC|GMT|[+-]\d{2}:?\d{2})?"
)
