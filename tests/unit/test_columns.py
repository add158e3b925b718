"""The column model both tables render (model/columns.py, issue 46 item 5): a
holder's name cut to a column keeps both its ends, so the part that tells
holders apart survives (the demo's sessions all read `lockwatch-demo-67f5e5…`
at 80 and 120 columns before), and the generic HOLDER and AGE say one thing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lockwatch.model import columns
from lockwatch.model.columns import Said
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.policy import StalenessPolicy

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
DEMO = "lockwatch-demo-67f5e5a2/"


def demo_cell(role: str) -> Said:
    name = f"{DEMO}{role}"
    return Said(f"{name} idle in transaction: SELECT pg_advisory_lock(1) · postgres", name)


@pytest.mark.parametrize("width", [22, 34, 40])  # the dashboard at 80 and 120, ls
@pytest.mark.parametrize("role", ["migrate", "billing-worker", "nightly-reindex", "chain-a"])
def test_a_cut_keeps_the_end_of_the_holders_name(width: int, role: str) -> None:
    cut = demo_cell(role).fit(width)
    assert len(cut) == width and role in cut, cut
    # The rest keeps at least a third of the cell: what the session is doing.
    assert " idle" in cut, cut


def test_the_demos_sessions_read_apart_at_80_columns() -> None:
    cells = {demo_cell(role).fit(22) for role in ("migrate", "chain-a", "chain-b", "row-holder")}
    assert len(cells) == 4, cells
    assert demo_cell("migrate").fit(22) == "lockwa…/migrate idle …"


def test_a_cell_that_fits_is_whole_and_one_without_a_name_is_cut_at_its_end() -> None:
    assert Said("report-job active · app", "report-job").fit(40) == "report-job active · app"
    assert Said("sqlite3 (pid 4242) + 2 more").fit(12) == "sqlite3 (pi…"
    # A name with no separator: its start and its larger end.
    assert (
        Said("abcdefghijklmnopqrstuvwxyz rest", "abcdefghijklmnopqrstuvwxyz").fit(12)
        == "abc…wxyz re…"
    )


def test_control_characters_are_spelled_out_before_the_cut() -> None:
    assert Said("evil\x1b[2Jname active", "evil\x1b[2Jname").fit(40) == "evil\\x1b[2Jname active"


def lock(**fields: object) -> Lock:
    base: dict[str, object] = {
        "id": "file:/x.lock",
        "source": "file",
        "format": "pidfile",
        "name": "x",
        "path": "/x.lock",
        "holder": Holder(pid=4242, host="db1", actor="deploy"),
        "acquired_at": NOW - timedelta(seconds=75),
        "facts": FileFacts(StalenessPolicy()),
        "content": {},
    }
    base.update(fields)
    return Lock(**base)  # type: ignore[arg-type]


def test_a_recorded_holder_says_its_pid_host_actor_and_whether_it_runs() -> None:
    dead = Verdict(State.STALE, (), alive=False)
    assert columns.holder(lock(), dead).text == "4242@db1 deploy (dead)"
    assert columns.holder(lock(holder=Holder()), dead).text == ""
    assert columns.holder(lock(holder=Holder(actor="ci")), Verdict(State.ACTIVE)).text == "ci"


def test_age_counts_from_the_grant_else_the_verdicts_age_else_nothing() -> None:
    active = Verdict(State.ACTIVE, (), age_seconds=12.0)
    assert columns.age(lock(), active, NOW) == "1m15s"
    assert columns.age(lock(acquired_at=None), active, NOW) == "12s"
    assert columns.age(lock(acquired_at=None), Verdict(State.ACTIVE), NOW) == ""
