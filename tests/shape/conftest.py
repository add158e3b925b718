"""The beacon's server for every test here, and (for the in-process tests of
its surfaces) its registry entry as the grafted copy of test_new_source.py has it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lockwatch.sources import registry
from lockwatch.sources.lazy import LazySource
from tests.shape.beacon_server import BeaconServer, serving

TOKEN = "s3cret"


@pytest.fixture
def beacon() -> Iterator[BeaconServer]:
    """A beacon server on a free loopback port: one lapsed lease, one live one."""
    with serving(TOKEN) as server:
        server.put("nightly-report", "cron@db7", fence=41, lasts=-90.0)
        server.put("deploy", "ops-bot", fence=7, lasts=3600.0)
        yield server


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The beacon's registry entry, in this process, for a test of one surface
    (the proof that nothing else is needed is test_new_source.py's copy)."""
    entry = LazySource("tests.shape.beacon")
    monkeypatch.setattr(registry, "SOURCES", (*registry.SOURCES, entry))
