"""Retry backoff of the Postgres source: pure arithmetic, no server needed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockwatch.model.status import backoff_seconds

pytestmark = pytest.mark.postgres

CAP = 30.0


def test_doubles_from_one_second_up_to_the_cap() -> None:
    assert [backoff_seconds(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]


def test_no_failure_yet_still_waits_a_second() -> None:
    assert backoff_seconds(0) == 1.0


def test_never_decreases_without_jitter() -> None:
    delays = [backoff_seconds(n) for n in range(0, 200)]
    assert delays == sorted(delays)
    assert max(delays) == CAP


@pytest.mark.parametrize(("failures", "base"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 16.0)])
def test_jitter_spreads_by_at_most_a_fifth(failures: int, base: float) -> None:
    assert backoff_seconds(failures, -1.0) == pytest.approx(base * 0.8)
    assert backoff_seconds(failures, 1.0) == pytest.approx(base * 1.2)
    assert backoff_seconds(failures, 0.0) == base


def test_jitter_never_lifts_past_the_cap() -> None:
    assert backoff_seconds(6, 1.0) == CAP
    assert backoff_seconds(50, 1.0) == CAP
    assert backoff_seconds(50, -1.0) == pytest.approx(CAP * 0.8)


def test_a_smaller_cap_is_honoured() -> None:
    assert backoff_seconds(10, 1.0, cap=5.0) == 5.0


@given(
    failures=st.integers(min_value=0, max_value=10**6),
    jitter=st.floats(min_value=-1.0, max_value=1.0),
)
def test_bounds(failures: int, jitter: float) -> None:
    base = min(CAP, 2.0 ** min(max(0, failures - 1), 64))
    delay = backoff_seconds(failures, jitter)
    assert 0.5 <= delay <= CAP
    assert base * 0.8 - 1e-9 <= delay <= base * 1.2 + 1e-9


@pytest.mark.parametrize("failures", [1025, 10_000])
def test_stays_at_the_cap_however_long_the_outage(failures: int) -> None:
    """1025 failures is about 8.5 h at 30 s a retry: 2.0 ** 1024 once overflowed here."""
    assert backoff_seconds(failures) == CAP
    assert backoff_seconds(failures, 1.0) == CAP


async def test_run_polls_on_its_interval_and_backs_off_while_failing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The poll loop without real waiting: asyncio.sleep is replaced by a recorder."""
    import asyncio

    from lockwatch.sources.postgres.source import PgSource

    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 4:
            raise asyncio.CancelledError

    monkeypatch.setattr("lockwatch.sources.postgres.source.asyncio.sleep", fake_sleep)
    seen: list[str] = []

    async def on_poll(polled: PgSource) -> None:
        seen.append(polled.status.state)

    dead = PgSource("postgresql://nobody@127.0.0.1:1/none", connect_timeout_s=1)
    with pytest.raises(asyncio.CancelledError):
        await dead.run(2.0, on_poll)
    assert seen == ["disconnected"] * 4
    assert len(slept) == 4
    # 1, 2, 4, 8 s (±20% jitter), never the 2 s interval of a healthy source
    for attempt, delay in enumerate(slept, start=1):
        assert 0.8 * 2 ** (attempt - 1) <= delay <= 1.2 * 2 ** (attempt - 1)
