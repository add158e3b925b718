"""The beacon on the surfaces a subprocess cannot look into: the dashboard's row,
detail pane and filter, serve's metrics, a recording's round trip, its
compare-and-swap. Its registry entry is added in this process (`registered`);
that nothing else is needed is test_new_source.py's proof, on a copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import SystemClock
from lockwatch.model import codec
from lockwatch.model.action import ActionRefused, Asked, Doing, Kind
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.process import StaticProcesses
from lockwatch.model.query import parse
from lockwatch.model.verdict import State
from lockwatch.serve.metrics import figures
from lockwatch.sources import registry
from lockwatch.sources.recording import Recorder, ReplayFeed
from tests.conftest import LOCAL_HOST, NOW
from tests.serve.test_metrics import exposition
from tests.shape.beacon.facts import BeaconLease
from tests.shape.beacon.poller import BeaconPoller
from tests.shape.beacon_server import BeaconServer
from tests.shape.conftest import TOKEN
from tests.ui.fakes import builtin_themes, row_text
from tests.ui.test_actions_ui import select, until
from tests.ui.test_pilot import detail_text

pytestmark = pytest.mark.usefixtures("registered")


def entries(beacon: BeaconServer) -> dict[str, Entry]:
    """The server's leases as one poll sees them, judged now."""
    polled = BeaconPoller(beacon.url, None, SystemClock()).poll()
    assert polled.locks is not None, polled.statuses
    judged = judge(polled.locks, StaticProcesses(), polled.at, LOCAL_HOST)
    return {entry.lock.name: entry for entry in judged}


async def test_the_dashboard_shows_its_row_detail_and_filters_by_its_name(
    beacon: BeaconServer,
) -> None:
    from lockwatch.cli.watch import build_app
    from lockwatch.cli.where import select_targets
    from lockwatch.config import Config

    lapsed = f"beacon:{beacon.name}:nightly-report"
    targets = select_targets({"beacon_urls": (beacon.url,)}, Config(), {})
    app = build_app(targets, host=LOCAL_HOST, readonly=True, themes=builtin_themes())
    app.animation_level = "none"
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: lapsed in app.board, "the beacon's rows")
        assert app.board.verdict(lapsed).state is State.STALE
        # On the board is not yet drawn: under load the table's first layout comes later.
        table = app.query_one("#table")
        await until(
            pilot,
            lambda: app.rows.index_of(lapsed) is not None and table.size.height > 0,
            "the beacon's row drawn",
        )
        row = row_text(app, lapsed)
        assert "bcn" in row and "cron@db7 (fence 41)" in row
        await select(pilot, lapsed)
        await pilot.press("enter")
        await until(pilot, lambda: app.locks.detail.lock_id == lapsed, "its detail")
        text = detail_text(app)
        assert "Beacon lease" in text and "41" in text and "beacon_lapsed" in text
        await pilot.press("escape", "slash", *"source:bcn", "enter")
        await until(pilot, lambda: app.rows.query.text == "source:bcn", "the filter")
        assert len(app.rows.ids) == 2


def test_the_filter_takes_its_names(beacon: BeaconServer) -> None:
    names = registry.source_names()
    assert names["beacon"] == names["bcn"] == "beacon"
    seen = entries(beacon)
    for typed in ("source:beacon", "source:bcn", "holder:cron@db7", "state:stale"):
        query = parse(typed, names)
        shown = {name for name, e in seen.items() if query.matches(e.lock, e.verdict)}
        assert "nightly-report" in shown, typed


def test_serve_counts_its_locks_under_its_name(beacon: BeaconServer) -> None:
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("beacon:x", NOW, upserts=tuple(entries(beacon).values())))
    samples = exposition(figures(board, NOW, sources=("file", "beacon")))
    assert samples[("lockwatch_locks", (("source", "beacon"), ("state", "stale")))] == 1
    assert samples[("lockwatch_locks", (("source", "beacon"), ("state", "active")))] == 1


def test_a_recording_keeps_its_facts(tmp_path: Path, beacon: BeaconServer) -> None:
    path = tmp_path / "incident.rec"
    recorder = Recorder(path, host=LOCAL_HOST, now=NOW)
    change = ChangeSet("beacon:x", NOW, upserts=tuple(entries(beacon).values()))
    recorder.write(change)
    recorder.close()
    (line,) = ReplayFeed.open(path)._lines
    back = codec.loads_line(line)
    assert isinstance(back, ChangeSet) and back.upserts == change.upserts
    assert isinstance(back.upserts[0].lock.facts, BeaconLease)


def test_its_compare_and_swap_refuses_a_lease_taken_again(beacon: BeaconServer) -> None:
    lapsed = entries(beacon)["nightly-report"]
    provider = registry.by_name("beacon").actions  # type: ignore[union-attr]
    assert provider is not None
    plan = provider.plan(Kind.BREAK, lapsed.lock, lapsed.verdict, Asked())
    assert plan.refusal is None and not plan.needs_name
    beacon.put("nightly-report", "cron@db8", fence=42, lasts=60.0)
    reach = provider.reach(_wanted(beacon_urls=(beacon.url,)))
    with pytest.raises(ActionRefused) as refused:
        provider.run(plan, Doing("a1", "stamp", reach=reach))
    assert refused.value.code == "changed"
    assert beacon.leases["nightly-report"].fence == 42
    (delete,) = beacon.deletes()
    assert (delete.if_match, delete.token) == ("41", TOKEN)


def _wanted(**values: Any) -> Any:
    from lockwatch.config import Config
    from lockwatch.sources.contract import Wanted

    return Wanted(paths=(), values=values, config=Config(), environ={"BEACON_TOKEN": TOKEN})


def test_a_token_file_others_may_read_is_refused(tmp_path: Path) -> None:
    """The token is read as every server source reads a password file."""
    from lockwatch.config import from_mapping
    from lockwatch.sources.contract import SourceError, Wanted

    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o644)
    config = registry.configured(from_mapping({"beacon": {"token_file": str(token)}}))
    provider = registry.by_name("beacon").actions  # type: ignore[union-attr]
    assert provider is not None
    with pytest.raises(SourceError, match=r"^beacon\.token_file .*token"):
        provider.reach(Wanted((), {}, config, {}))
    token.chmod(0o600)
    assert provider.reach(Wanted((), {}, config, {}))["beacon_servers"].token == TOKEN
