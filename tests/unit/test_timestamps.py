"""parse_timestamp / plus_seconds: every shape a seed writes, and garbage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lockwatch.model.timestamps import parse_timestamp, plus_seconds
from tests.conftest import NOW

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _is_utc(at: datetime) -> bool:
    return at.tzinfo is not None and at.utcoffset() == timedelta(0)


# --- ISO-8601 text ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # clawdbot's documented format and gitclaw's `new Date().toISOString()`
        ("2026-11-21T12:00:00.000Z", NOW),
        ("2026-11-21T12:00:00Z", NOW),
        # tower-fleet's `date -u +%Y-%m-%dT%H:%M:%SZ`
        ("2026-11-21T12:00:00Z", NOW),
        # clawdbot/little-loops Python `datetime.now(timezone.utc).isoformat()`
        ("2026-11-21T12:00:00.250000+00:00", NOW + timedelta(milliseconds=250)),
        ("2026-11-21T12:00:00+00:00", NOW),
        # clawdbot PowerShell `ToString("o")`: seven fractional digits
        ("2026-11-21T12:00:00.1234567Z", NOW + timedelta(microseconds=123456)),
        # other offsets are converted to UTC
        ("2026-11-21T13:30:00+01:30", NOW),
        ("2026-11-21T07:00:00-05:00", NOW),
        ("2026-11-21T17:30:00+0530", NOW),
        # naive means UTC
        ("2026-11-21T12:00:00", NOW),
        ("2026-11-21 12:00:00", NOW),
        ("2026-11-21T12:00", NOW),
        ("2026-11-21", NOW.replace(hour=0)),
        # surrounding whitespace (a trailing newline from `echo`)
        ("  2026-11-21T12:00:00Z\n", NOW),
    ],
)
def test_iso_text_parses_to_aware_utc(text: str, expected: datetime) -> None:
    parsed = parse_timestamp(text)
    assert parsed == expected
    assert parsed is not None and _is_utc(parsed)


def test_offset_is_converted_not_dropped() -> None:
    parsed = parse_timestamp("2026-11-21T12:00:00+02:00")
    assert parsed == datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    assert parsed is not None and parsed.hour == 10 and _is_utc(parsed)


def test_naive_and_z_and_zero_offset_agree() -> None:
    forms = ["2026-11-21T12:00:00", "2026-11-21T12:00:00Z", "2026-11-21T12:00:00+00:00"]
    assert {parse_timestamp(form) for form in forms} == {NOW}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "\n",
        "yesterday",
        "now",
        "12345",
        "2026-13-01T00:00:00Z",
        "2026-11-31T00:00:00Z",
        "2026-11-21T25:00:00Z",
        "2026-11-21T12:00:00+25:00",
        "2026-11-21T12:00:00ZZ",
        "21/11/2026 12:00",
        "Sat, 21 Nov 2026 12:00:00 GMT",
        "T12:00",
        "2026-11-21T12:00:00Z" + " " * 60 + "x",
        "2" * 65,
        "\x00",
    ],
)
def test_garbage_text_is_not_a_time(text: str) -> None:
    assert parse_timestamp(text) is None


def test_text_longer_than_64_characters_is_rejected_even_if_valid() -> None:
    text = "2026-11-21T12:00:00.000000+00:00"
    padded = " " * (65 - len(text)) + text + "\t" * 10
    # Stripped it is valid; the length cap applies to the stripped text only.
    assert parse_timestamp(padded) == NOW
    assert (
        parse_timestamp("2026-11-21T12:00:00.000000000000000000000000000000000000000000000Z")
        is None
    )


@pytest.mark.parametrize(
    "text",
    [
        # Valid text whose UTC conversion falls outside datetime's range.
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+01:00",
    ],
)
def test_offsets_overflowing_the_calendar_are_not_times(text: str) -> None:
    assert parse_timestamp(text) is None


# --- epoch numbers ----------------------------------------------------------


def test_epoch_seconds_int() -> None:
    assert parse_timestamp(int(NOW.timestamp())) == NOW


def test_epoch_seconds_float_keeps_fraction() -> None:
    assert parse_timestamp(NOW.timestamp() + 0.5) == NOW + timedelta(milliseconds=500)


def test_epoch_milliseconds() -> None:
    millis = int(NOW.timestamp()) * 1000 + 250
    parsed = parse_timestamp(millis)
    assert parsed == NOW + timedelta(milliseconds=250)
    assert parsed is not None and _is_utc(parsed)


def test_epoch_zero_is_1970() -> None:
    assert parse_timestamp(0) == EPOCH


def test_millisecond_threshold_boundary() -> None:
    # 1e11 itself is seconds (the year 5138); anything above is milliseconds.
    assert parse_timestamp(10**11) == EPOCH + timedelta(seconds=10**11)
    assert parse_timestamp(10**11 + 1) == EPOCH + timedelta(milliseconds=10**11 + 1)


@pytest.mark.parametrize("value", [True, False])
def test_bools_are_not_epochs(value: bool) -> None:
    assert parse_timestamp(value) is None


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_not_times(value: float) -> None:
    assert parse_timestamp(value) is None


@pytest.mark.parametrize("value", [-1, -0.5, -(10**12)])
def test_negative_epochs_are_not_times(value: float) -> None:
    assert parse_timestamp(value) is None


@pytest.mark.parametrize("value", [1e300, 1.7e308, 10**30, 2**63, 10**17])
def test_huge_epochs_are_not_times(value: float) -> None:
    assert parse_timestamp(value) is None


def test_int_too_large_for_a_float_is_not_a_time() -> None:
    # JSON integers have no size limit; `{"time": 1000...0}` reaches this via generic.
    assert parse_timestamp(10**400) is None


@pytest.mark.parametrize("value", [None, [], {}, b"2026-11-21T12:00:00Z", object(), 1j])
def test_other_types_are_not_times(value: object) -> None:
    assert parse_timestamp(value) is None


# --- plus_seconds -----------------------------------------------------------


@pytest.mark.parametrize("seconds", [0, 30, 0.001, -600, 86400 * 365])
def test_plus_seconds_adds(seconds: float) -> None:
    assert plus_seconds(NOW, seconds) == NOW + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("at", "seconds"),
    [
        (datetime.max.replace(tzinfo=UTC), 1),
        (datetime.min.replace(tzinfo=UTC), -1),
        (NOW, 1e20),
        (NOW, -1e20),
        (NOW, 10**30),
        (NOW, float("inf")),
        (NOW, float("-inf")),
        (NOW, float("nan")),
    ],
)
def test_plus_seconds_overflow_is_none(at: datetime, seconds: float) -> None:
    assert plus_seconds(at, seconds) is None
