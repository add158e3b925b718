"""A new action kind is one entry in model/kinds.py's table plus a provider that
offers it (issue 43 item 2). `renew` (a lease's time starts again, its fence
kept) is added here that way and nothing else: its command, its key in the
dashboard's Locks view, its confirmation and its done event all come from the
entry; the beacon's provider (tests/shape/beacon) carries it out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lockwatch.model import kinds
from lockwatch.model.action import ActionRefused, Asked, Doing, Done, Kind, Plan
from lockwatch.model.kinds import ActionKind
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.keys import Group, help_rows
from tests.conftest import LOCAL_HOST, run_cli
from tests.shape.beacon import plugin
from tests.shape.beacon.facts import BeaconLease
from tests.ui.fakes import builtin_themes
from tests.ui.test_actions_ui import notes, open_action, press_confirm, type_into, until

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
LAPSED = plugin.lease_id("nightly-report")
URL = f"beacon://:{plugin.SERVER_TOKEN}@{plugin.SERVER_NAME}"
RENEWED_FOR = 600.0


@dataclass
class RenewingBeacon(plugin.BeaconActions):
    """The beacon's provider, offering renew besides break."""

    kinds: frozenset[Kind] = field(default_factory=lambda: frozenset({Kind.BREAK, RENEW.kind}))

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        if kind is not RENEW.kind:
            return super().plan(kind, lock, verdict, asked)
        lease = lock.facts
        assert isinstance(lease, BeaconLease)
        effect = f"renew {lease.key} for {RENEWED_FOR:.0f} s if its fence is still {lease.fence}"
        return Plan(kind, lock, verdict, "lock_renewed", effect)

    def run(self, plan: Plan, doing: Doing) -> Done:
        if plan.kind is not RENEW.kind:
            return super().run(plan, doing)
        lease = plan.lock.facts
        assert isinstance(lease, BeaconLease)
        held = plugin.SERVER.get(lease.key)
        if held is None or held.fence != lease.fence:
            raise ActionRefused("changed", f"{lease.key} is no longer fence {lease.fence}")
        held.lease_left = RENEWED_FOR
        return Done({"fence": lease.fence}, f"renewed {lease.key} (fence {lease.fence})")


@pytest.fixture(autouse=True)
def renew_in_the_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The table entry and the provider: all a new kind is."""
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, RENEW))
    monkeypatch.setattr(plugin.SOURCE, "actions", RenewingBeacon())
    yield


def test_its_command_is_built_from_the_table(tmp_path: Path) -> None:
    code, out, _ = run_cli("--help")
    assert code == 0 and "renew" in out and "Renew a lease" in out
    audit = tmp_path / "audit.jsonl"
    code, out, err = run_cli(
        "renew", LAPSED, "--beacon", URL, "--reason", "cron is back", "--yes",
        "--audit-log", str(audit),
    )  # fmt: skip
    assert code == 0, err
    assert "renewed nightly-report (fence 41)" in out
    assert plugin.SERVER["nightly-report"].lease_left == RENEWED_FOR
    last = json.loads(audit.read_text().splitlines()[-1])
    assert (last["action"], last["event"], last["result"]) == ("renew", "lock_renewed", "success")


def test_its_key_is_in_the_help() -> None:
    assert ("w", RENEW.help + " [locks]") in help_rows([Group.ACTION])


async def test_its_key_renews_from_the_dashboard(tmp_path: Path) -> None:
    from lockwatch.cli.watch import build_app
    from lockwatch.cli.where import select_targets
    from lockwatch.config import Config

    targets = select_targets({"beacon_urls": (URL,)}, Config(), {})
    app: LockwatchApp = build_app(
        targets, host=LOCAL_HOST, audit_log=tmp_path / "audit.jsonl", themes=builtin_themes()
    )
    app.animation_level = "none"
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: LAPSED in app.board, "the beacon's rows")
        await open_action(pilot, LAPSED, key="w")
        await type_into(pilot, "#reason", "cron is back")
        await press_confirm(pilot)
        await until(pilot, lambda: any("renewed nightly-report" in n for n in notes(app)), "done")
        assert any(e.kind == "renewed" and e.lock_id == LAPSED for e in app.board.events)
    assert plugin.SERVER["nightly-report"].lease_left == RENEWED_FOR
