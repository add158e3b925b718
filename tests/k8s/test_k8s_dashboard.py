"""The dashboard breaks a Lease as the CLI does, through the provider's reach
(the run's kubeconfig context), against the fake API server (fakeapi.py, an
imitation: no kube-apiserver here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lockwatch.sources.k8s import ids
from lockwatch.ui.app import LockwatchApp
from tests.conftest import LOCAL_HOST
from tests.k8s.conftest import lease
from tests.k8s.fakeapi import FakeApi
from tests.ui.fakes import builtin_themes
from tests.ui.test_actions_ui import notes, open_action, press_confirm, type_into, until


def _dashboard(values: dict[str, Any], environ: dict[str, str], audit_log: Path) -> LockwatchApp:
    """The dashboard as `lockwatch --k8s` builds it (cli/watch.py)."""
    from lockwatch.cli.watch import build_app
    from lockwatch.cli.where import select_targets
    from lockwatch.config import Config

    targets = select_targets(values, Config(), environ)
    app = build_app(targets, host=LOCAL_HOST, audit_log=audit_log, themes=builtin_themes())
    app.animation_level = "none"
    return app


async def test_the_dashboard_breaks_a_stale_lease_through_the_kubeconfig_context(
    fake: FakeApi, config: dict[str, str], tmp_path: Path
) -> None:
    # Old by the clock, so unknown at first sight; stale once the dashboard has watched
    # it unrenewed for its leaseDurationSeconds (1 s), as client-go's candidates judge.
    lease(fake, "apps", "web-leader", "web-5c9-dead", renewed=600, duration=1)
    lock_id = ids.k8s_id(fake.name, "lease", "apps", "web-leader")
    audit = tmp_path / "audit.jsonl"
    app = _dashboard({"k8s": True}, config, audit)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: lock_id in app.board, "the Lease's row")
        assert app.board.verdict(lock_id).state.value == "unknown"
        await until(pilot, lambda: app.board.verdict(lock_id).state.value == "stale", "stale")
        await open_action(pilot, lock_id)
        await type_into(pilot, "#reason", "pod gone, INC-7")
        await press_confirm(pilot)
        await until(pilot, lambda: any("cleared holderIdentity" in n for n in notes(app)), "done")
    assert "holderIdentity" not in fake.spec("apps", "web-leader")
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert records[-1]["target"]["source"] == "k8s" and records[-1]["result"] == "success"
