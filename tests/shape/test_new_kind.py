"""A new action kind is one entry in model/kinds.py's table plus a provider that
offers it (issue 43 item 2). `renew` (a lease's time starts again, its fence
kept) is added here that way and nothing else: its command, its key in the
dashboard's Locks view, its confirmation and its done event all come from the
entry; the beacon's provider (tests/shape/beacon) carries it out."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lockwatch.model import kinds
from lockwatch.model.action import Asked, Doing, Done, Kind, Plan
from lockwatch.model.kinds import ActionKind
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.keys import Group, help_rows
from tests.conftest import LOCAL_HOST, run_cli
from tests.shape.beacon import actions, plugin
from tests.shape.beacon.facts import BeaconLease
from tests.shape.beacon_server import BeaconServer
from tests.shape.conftest import TOKEN
from tests.ui.fakes import builtin_themes
from tests.ui.test_actions_ui import notes, open_action, press_confirm, type_into, until

pytestmark = pytest.mark.usefixtures("registered")

RENEW = ActionKind(
    Kind("renew"),
    verb="Renew",
    key="w",
    label="Renew",
    help="renew a lease: its time starts again, its fence kept",
    palette="Renew lease",
    views=frozenset({kinds.LOCKS}),
    command="renew",
    short_help="Renew a lease: its time starts again.",
    doc="Renew the lease TARGET: its time starts again, its fence kept.",
    done="renewed",
)
RENEWED_FOR = 600.0


class RenewingBeacon(actions.BeaconActions):
    """The beacon's provider, offering renew besides break."""

    kinds = frozenset({Kind.BREAK, RENEW.kind})

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        if kind is not RENEW.kind:
            return super().plan(kind, lock, verdict, asked)
        lease = actions.lease_of(lock)
        effect = f"renew {lease.key} for {RENEWED_FOR:.0f} s if its fence is still {lease.fence}"
        return Plan(kind, lock, verdict, "lock_renewed", effect)

    def run(self, plan: Plan, doing: Doing) -> Done:
        if plan.kind is not RENEW.kind:
            return super().run(plan, doing)
        lease = actions.lease_of(plan.lock)
        assert isinstance(lease, BeaconLease)
        self.send(doing, lease, "POST", f"/renew?seconds={RENEWED_FOR:.0f}")
        return Done({"fence": lease.fence}, f"renewed {lease.key} (fence {lease.fence})")


@pytest.fixture(autouse=True)
def renew_in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table entry and the provider: all a new kind is."""
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, RENEW))
    monkeypatch.setattr(plugin.BeaconSource, "actions", RenewingBeacon())


def renewed(beacon: BeaconServer) -> bool:
    """Whether the lapsed lease now lasts about RENEWED_FOR more seconds."""
    left = beacon.leases["nightly-report"].lapses_at - time.time()
    return RENEWED_FOR - 60 < left <= RENEWED_FOR


def test_its_command_is_built_from_the_table(tmp_path: Path, beacon: BeaconServer) -> None:
    code, out, _ = run_cli("--help")
    assert code == 0 and "renew" in out and "Renew a lease" in out
    audit = tmp_path / "audit.jsonl"
    lapsed = f"beacon:{beacon.name}:nightly-report"
    code, out, err = run_cli(
        "renew", lapsed, "--beacon", beacon.url, "--reason", "cron is back", "--yes",
        "--audit-log", str(audit), env={"BEACON_TOKEN": TOKEN},
    )  # fmt: skip
    assert code == 0, err
    assert "renewed nightly-report (fence 41)" in out
    assert renewed(beacon)
    last = json.loads(audit.read_text().splitlines()[-1])
    assert (last["action"], last["event"], last["result"]) == ("renew", "lock_renewed", "success")


def test_its_key_is_in_the_help() -> None:
    assert ("w", RENEW.help + " [locks]") in help_rows([Group.ACTION])


async def test_its_key_renews_from_the_dashboard(tmp_path: Path, beacon: BeaconServer) -> None:
    from lockwatch.cli.watch import build_app
    from lockwatch.cli.where import select_targets
    from lockwatch.config import Config

    lapsed = f"beacon:{beacon.name}:nightly-report"
    environ = {"BEACON_TOKEN": TOKEN}
    targets = select_targets({"beacon_urls": (beacon.url,)}, Config(), environ)
    app: LockwatchApp = build_app(
        targets, host=LOCAL_HOST, audit_log=tmp_path / "audit.jsonl", themes=builtin_themes()
    )
    app.animation_level = "none"
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: lapsed in app.board, "the beacon's rows")
        await open_action(pilot, lapsed, key="w")
        await type_into(pilot, "#reason", "cron is back")
        await press_confirm(pilot)
        await until(pilot, lambda: any("renewed nightly-report" in n for n in notes(app)), "done")
        assert any(e.kind == "renewed" and e.lock_id == lapsed for e in app.board.events)
    assert renewed(beacon)
