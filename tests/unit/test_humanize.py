"""Durations as the dashboard, the CLI and reports write them."""

from __future__ import annotations

import pytest

from lockwatch.model.humanize import duration


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.0, "0s"),
        (0.3, "0.3s"),
        (45.9, "45s"),
        (125.0, "2m05s"),
        (3 * 3600 + 7 * 60, "3h07m"),
        (4 * 86400 + 2 * 3600, "4d02h"),
        (float("inf"), "∞"),
    ],
)
def test_durations(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


@pytest.mark.parametrize("seconds", [-0.6, -1.0, -3600.0, -1e-9])
def test_a_duration_is_never_negative(seconds: float) -> None:
    # `idle -0.6s` was shown for a session whose server clock ran ahead.
    assert duration(seconds) == "0s"
