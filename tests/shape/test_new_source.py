"""The shape's proof (issue 32): a new source with its own facts, rules, detail
section and break action is a package and one registry line.

`tests/shape/beacon/` is such a package, written as a contributor would; these
tests add it to the registry the way its one line would (`SOURCES`, patched for
the test alone) and touch nothing else of lockwatch. Then every surface has to
get it right by asking its facts and its provider: `ls --json` and the table,
the dashboard's row and detail pane, the filter's `source:`, serve's metrics, a
recording's round trip, and a `break` audited under the source's own name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model import codec
from lockwatch.model.action import ActionRefused, Doing, Kind
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, judge
from lockwatch.model.process import StaticProcesses
from lockwatch.model.query import parse
from lockwatch.model.verdict import State
from lockwatch.serve.metrics import figures
from lockwatch.sources import registry
from lockwatch.sources.recording import Recorder, ReplayFeed
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.table import LockTable
from tests.conftest import LOCAL_HOST, NOW, run_cli
from tests.serve.test_metrics import exposition
from tests.shape.beacon import plugin
from tests.shape.beacon.facts import BeaconLease
from tests.ui.fakes import builtin_themes, row_text, settle
from tests.ui.test_actions_ui import notes, open_action, press_confirm, type_into, until
from tests.ui.test_pilot import detail_text

LAPSED = plugin.lease_id("nightly-report")
LIVE = plugin.lease_id("deploy")
URL = f"beacon://:{plugin.SERVER_TOKEN}@{plugin.SERVER_NAME}"


def _entries() -> list[Any]:
    return judge(plugin.locks_now(NOW), StaticProcesses(), NOW, LOCAL_HOST)


def test_ls_json_and_the_table_show_its_locks_judged_by_its_rules(tmp_path: Path) -> None:
    code, out, err = run_cli("ls", "--json", str(tmp_path))
    assert code == 0, err
    records = {record["id"]: record for record in json.loads(out)["locks"]}
    lapsed, live = records[LAPSED], records[LIVE]
    assert lapsed["source"] == "beacon" and lapsed["format"] == "beacon-lease"
    assert lapsed["state"] == "stale"
    assert [r["code"] for r in lapsed["reasons"]] == ["beacon_lapsed"]
    # Its own JSON fields, from its facts.
    assert (lapsed["fence"], lapsed["owner"], lapsed["key"]) == (41, "cron@db7", "nightly-report")
    assert live["state"] == "active" and live["next_change_at"] is not None

    code, out, err = run_cli("ls", str(tmp_path))
    assert code == 0, err
    line = next(line for line in out.splitlines() if "nightly-report" in line)
    assert "stale" in line and "cron@db7 (fence 41)" in line


async def test_the_dashboard_shows_its_row_detail_and_filters_by_its_name() -> None:
    clock = FrozenClock(NOW)
    selected = plugin.SOURCE.select(_wanted())
    assert selected is not None
    app = LockwatchApp(
        list(selected.feeds(clock, LOCAL_HOST)),
        clock=clock,
        host=LOCAL_HOST,
        themes=builtin_themes(),
        tick_seconds=3600.0,
    )
    app.animation_level = "none"
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        assert set(app.rows.ids) == {LAPSED, LIVE}
        assert app.board.verdict(LAPSED).state is State.STALE
        # The row: the source's short name, its holder as its facts say it.
        row = row_text(app, LAPSED)
        assert "bcn" in row and "cron@db7 (fence 41)" in row

        # The detail pane: its own section.
        table = app.query_one("#table", LockTable)
        for _ in range(len(app.rows.ids)):
            if table.selected == LAPSED:
                break
            await pilot.press("down")
        assert table.selected == LAPSED
        await pilot.press("enter")
        await pilot.pause()
        assert app.locks.detail.lock_id == LAPSED
        text = detail_text(app)
        assert "Beacon lease" in text and "fence" in text and "41" in text
        assert "beacon_lapsed" in text

        # The filter knows its name and short name, from the registry.
        await pilot.press("escape", "slash", *"source:bcn", "enter")
        await pilot.pause()
        assert app.rows.query.text == "source:bcn"
        assert set(app.rows.ids) == {LAPSED, LIVE}


def test_the_filter_takes_its_names() -> None:
    names = registry.source_names()
    assert names["beacon"] == names["bcn"] == "beacon"
    entries = _entries()
    for typed in ("source:beacon", "source:bcn", "holder:cron@db7", "state:stale"):
        query = parse(typed, names)
        shown = {e.lock.id for e in entries if query.matches(e.lock, e.verdict)}
        assert LAPSED in shown, typed
    assert LIVE not in {
        e.lock.id for e in entries if parse("holder:cron", names).matches(e.lock, e.verdict)
    }


def test_serve_counts_its_locks_under_its_name() -> None:
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("beacon:x", NOW, upserts=tuple(_entries())))
    samples = exposition(figures(board, NOW, sources=("file", "beacon")))
    labels = (("source", "beacon"), ("state", "stale"))
    assert samples[("lockwatch_locks", labels)] == 1
    assert samples[("lockwatch_locks", (("source", "beacon"), ("state", "active")))] == 1
    stale = (("format", "beacon-lease"), ("name", "nightly-report"), ("source", "beacon"))
    assert samples[("lockwatch_lock_stale", stale)] == 1


def test_a_recording_keeps_its_facts(tmp_path: Path) -> None:
    path = tmp_path / "incident.rec"
    recorder = Recorder(path, host=LOCAL_HOST, now=NOW)
    change = ChangeSet("beacon:x", NOW, upserts=tuple(_entries()))
    recorder.write(change)
    recorder.close()
    replay = ReplayFeed.open(path)
    (line,) = replay._lines
    back = codec.loads_line(line)
    assert isinstance(back, ChangeSet)
    assert back.upserts == change.upserts
    lease = back.upserts[0].lock.facts
    assert isinstance(lease, BeaconLease) and lease.fence in (7, 41)


def test_break_is_audited_under_its_own_name(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    args = ("--reason", "cron died, INC-9", "--yes", "--audit-log", str(audit), "--beacon", URL)
    # A live lease: only with the typed name (--force), as for every source.
    code, _, err = run_cli("break", LIVE, *args)
    assert code == 1 and "--force" in err
    assert "deploy" in plugin.SERVER

    code, _, err = run_cli("break", LAPSED, *args)
    assert code == 0, err
    assert "nightly-report" not in plugin.SERVER
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    targets = [record["target"] for record in records if "target" in record]
    assert targets and all(target["source"] == "beacon" for target in targets)
    assert targets[-1]["id"] == LAPSED and targets[-1]["fence"] == 41


def test_the_cli_reaches_its_server_only_as_its_options_say(tmp_path: Path) -> None:
    """Its provider's reach (`--beacon URL`, with the token) is how a break gets to
    the server: without it, one line naming the option, and the lease stays."""
    audit = tmp_path / "audit.jsonl"
    code, _, err = run_cli(
        "break", LAPSED, "--reason", "x", "--yes", "--audit-log", str(audit)
    )  # fmt: skip
    assert code == 1 and "name it with --beacon" in err and err.count("\n") == 1, err
    assert "nightly-report" in plugin.SERVER


async def test_the_dashboard_breaks_it_through_the_same_reach_as_the_cli(tmp_path: Path) -> None:
    """The dashboard's session is handed what `lockwatch break --beacon URL` is
    (lockwatch.actions.reach, from the run's options): `b` on the lapsed lease
    drops it on the server, audited under the source's name."""
    app = _dashboard({"beacon_urls": (URL,)}, tmp_path / "audit.jsonl")
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: LAPSED in app.board, "the beacon's rows")
        await open_action(pilot, LAPSED)
        await type_into(pilot, "#reason", "cron died, INC-9")
        await press_confirm(pilot)
        await until(pilot, lambda: any("dropped nightly-report" in n for n in notes(app)), "done")
    assert "nightly-report" not in plugin.SERVER
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert records[-1]["target"]["source"] == "beacon" and records[-1]["result"] == "success"


async def test_the_dashboard_without_its_option_says_so_as_the_cli_does(tmp_path: Path) -> None:
    app = _dashboard({}, tmp_path / "audit.jsonl")
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: LAPSED in app.board, "the beacon's rows")
        await open_action(pilot, LAPSED)
        await type_into(pilot, "#reason", "cron died, INC-9")
        await press_confirm(pilot)
        await until(pilot, lambda: any("name it with --beacon" in n for n in notes(app)), "refusal")
    assert "nightly-report" in plugin.SERVER


def _dashboard(values: dict[str, Any], audit_log: Path) -> LockwatchApp:
    """The dashboard as `lockwatch --beacon URL` builds it (cli/watch.py)."""
    from lockwatch.cli.watch import build_app
    from lockwatch.cli.where import select_targets
    from lockwatch.config import Config

    targets = select_targets(values, Config(), {})
    app = build_app(targets, host=LOCAL_HOST, audit_log=audit_log, themes=builtin_themes())
    app.animation_level = "none"
    return app


def test_its_compare_and_swap_refuses_a_lease_taken_again() -> None:
    (lapsed,) = [e for e in _entries() if e.lock.id == LAPSED]
    provider = plugin.SOURCE.actions
    plan = provider.plan(Kind.BREAK, lapsed.lock, lapsed.verdict, _asked())
    assert plan.refusal is None and not plan.needs_name
    plugin.SERVER["nightly-report"] = plugin.Lease("cron@db8", fence=42, lease_left=60.0)
    with pytest.raises(ActionRefused) as refused:
        provider.run(plan, Doing("a1", "stamp", reach=provider.reach(_wanted(beacon_urls=(URL,)))))
    assert refused.value.code == "changed"
    assert plugin.SERVER["nightly-report"].fence == 42


def test_an_id_no_source_claims_is_refused_and_not_audited_as_a_file(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    code, _, err = run_cli(
        "break", "consul:127.0.0.1:8500:deploy", "--reason", "x", "--yes",
        "--audit-log", str(audit),
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1, err
    assert not audit.exists() or '"file"' not in audit.read_text()


def _wanted(**values: Any) -> Any:
    from lockwatch.config import Config
    from lockwatch.sources.contract import Wanted

    return Wanted(paths=(), values=values, config=Config(), environ={})


def _asked() -> Any:
    from lockwatch.model.action import Asked

    return Asked()
