"""Many hosts at once: two `lockwatch serve` processes on different trees, seen
together by `lockwatch ls --remote … --json` and in one dashboard (a Pilot test
against the real processes), each lock with its host, read-only; a serve that
goes away keeps its last locks on screen with its status saying so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockwatch.cli.watch import build_app
from lockwatch.cli.where import select_targets
from lockwatch.config import Config
from lockwatch.sources.remote import ids
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.panels import SourcesBar
from lockwatch.ui.table import TableHeader
from tests.serve.conftest import Served, serving, stale_tree
from tests.ui.fakes import row_text, until
from tests.ui.test_pilot import footer_words, plain

HOST = os.uname().nodename


@pytest.fixture
def two_serves(tmp_path: Path) -> Iterator[tuple[Served, Served]]:
    stale_tree(tmp_path / "east", ("east-deploy",))
    stale_tree(tmp_path / "west", ("west-deploy", "west-backup"))
    with (
        serving([str(tmp_path / "east")], tmp_path) as east,
        serving([str(tmp_path / "west")], tmp_path) as west,
    ):
        east.wait_healthy()
        west.wait_healthy()
        yield east, west


def ls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_ls_merges_remotes_with_a_host_per_lock(
    two_serves: tuple[Served, Served], tmp_path: Path
) -> None:
    east, west = two_serves
    assert east.url and west.url
    done = ls("--remote", east.url, "--remote", west.url, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["schema"] == "lockwatch.ls/1"
    by_path = {lock["path"]: lock for lock in document["locks"]}
    expected = {
        str(tmp_path / "east" / "east-deploy.pid"): east.url,
        str(tmp_path / "east" / "alive.pid"): east.url,
        str(tmp_path / "west" / "west-deploy.pid"): west.url,
        str(tmp_path / "west" / "west-backup.pid"): west.url,
        str(tmp_path / "west" / "alive.pid"): west.url,
    }
    assert set(by_path) == set(expected)
    for path, url in expected.items():
        lock = by_path[path]
        # Both serves run on this host: a remote does not speak for this host, so
        # their locks are shown under the address they were read from.
        assert lock["remote"] == url and lock["host"] == url.removeprefix("http://")
        assert lock["claimed_host"] == HOST
        assert lock["id"] == f"file:{path}"  # its id on its host: what to act on there
        assert lock["state"] == ("active" if path.endswith("alive.pid") else "stale")
    assert [(s["kind"], s["name"], s["status"]) for s in document["sources"]] == [
        ("remote", east.url, "connected"),
        ("remote", west.url, "connected"),
    ]
    # The same locks as each host serves them.
    for served in (east, west):
        own = json.loads(ls("--remote", str(served.url), "--json").stdout)
        assert {lock["id"] for lock in own["locks"]} == {
            lock["id"] for lock in document["locks"] if lock["remote"] == served.url
        }
    # Fleet-wide cron: stale anywhere is exit 3; a remote that is gone is exit 1.
    table = ls("--remote", east.url, "--fail-on-stale")
    assert table.returncode == 3
    where = east.url.removeprefix("http://")
    assert f"{where}:{tmp_path / 'east' / 'east-deploy.pid'}" in table.stdout
    west.stop()
    gone = ls("--remote", east.url, "--remote", west.url, "--json")
    assert gone.returncode == 1
    assert f"remote {west.url}: unreachable" in gone.stderr
    statuses = {s["name"]: s["status"] for s in json.loads(gone.stdout)["sources"]}
    assert statuses == {east.url: "connected", west.url: "disconnected"}


def notes(app: LockwatchApp) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def test_one_dashboard_watches_both_hosts(
    two_serves: tuple[Served, Served], tmp_path: Path
) -> None:
    east, west = two_serves
    assert east.url and west.url
    values = {"paths": (), "remotes": (east.url, west.url), "refresh": 0.2}
    targets = select_targets(values, Config(), {})
    app = build_app(targets, host="dashboard-host", audit_log=tmp_path / "audit.jsonl")
    east_id = ids.remote_id(east.url, f"file:{tmp_path / 'east' / 'east-deploy.pid'}")
    west_id = ids.remote_id(west.url, f"file:{tmp_path / 'west' / 'west-backup.pid'}")
    async with app.run_test(size=(140, 30)) as pilot:
        await until(
            pilot,
            lambda: east_id in app.board and west_id in app.board and len(app.board) == 5,
            "both hosts' locks in the dashboard",
            seconds=15,
        )
        await pilot.pause()
        header = plain(app.query_one("#sources", SourcesBar).content)
        assert f"remote {east.url} connected" in header
        assert f"remote {west.url} connected" in header
        assert "5 locks" in header and "3 stale" in header
        titles = app.query_one("#table-header", TableHeader).render()
        assert "HOST" in str(titles)
        row = row_text(app, east_id)
        assert HOST[:11] in row and "east-deploy" in row and "stale" in row

        # Read-only: another host's row offers no action; pressed anyway, b names
        # the command to run there (the remote's refusal), and nothing is touched.
        app.locks.table.select(east_id)
        await until(
            pilot,
            lambda: not {"Break", "Steal", "Mark"} & footer_words(app),
            "no action offered on a remote row",
        )
        await pilot.press("b")
        await until(pilot, lambda: any("lockwatch break" in n for n in notes(app)), "a refusal")
        (refusal,) = [n for n in notes(app) if "lockwatch break" in n]
        assert f"On {HOST} run: lockwatch break file:{tmp_path / 'east' / 'east-deploy.pid'}" in (
            refusal.replace("\n", " ")
        )
        assert (tmp_path / "east" / "east-deploy.pid").exists()

        # A host that goes away: its locks stay, its status says since when and
        # when it will be tried again.
        west.stop()

        def west_down() -> bool:
            text = plain(app.query_one("#sources", SourcesBar).content)
            return f"remote {west.url} disconnected" in text and "retry in" in text

        await until(pilot, west_down, "the west serve shown unreachable", seconds=15)
        header = plain(app.query_one("#sources", SourcesBar).content)
        assert "unreachable" in header and "showing data from" in header
        assert west_id in app.board and len(app.board) == 5
