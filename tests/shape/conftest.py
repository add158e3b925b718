"""The beacon's one registry line, for the tests of this directory alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lockwatch.sources import registry
from tests.shape.beacon import plugin


@pytest.fixture(autouse=True)
def beacon_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The source's one registry line, for this test only; a server with one
    lapsed lease and one live one."""
    monkeypatch.setattr(registry, "SOURCES", (*registry.SOURCES, plugin.SOURCE))
    plugin.SERVER.clear()
    plugin.SERVER.update(
        {
            "nightly-report": plugin.Lease("cron@db7", fence=41, lease_left=-90.0),
            "deploy": plugin.Lease("ops-bot", fence=7, lease_left=3600.0),
        }
    )
    yield
    plugin.SERVER.clear()
