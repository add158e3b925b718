"""One holder name in every view (issue 46, item 5), on a real server: `ls --pg`
named a PostgreSQL session `21499@127.0.0.1 postgres` where the dashboard said
`migrate idle in transaction: …`. Both tables now take HOLDER from one column
model: the same session reads the same in `ls` and in the dashboard (Pilot)."""

from __future__ import annotations

import pytest

from lockwatch.model.lock import Lock
from tests.holder_cells import dashboard_holder, ls_holder, same_holder
from tests.postgres.conftest import PgHarness

pytestmark = pytest.mark.postgres


async def test_ls_and_the_dashboard_name_a_session_alike(pg: PgHarness) -> None:
    migrate, waiter = pg.sessions("migrate", "waiter")
    migrate.execute("BEGIN")
    migrate.execute("SELECT pg_advisory_xact_lock(46, 5)")
    pg.block(waiter, "SELECT pg_advisory_lock(46, 5)")
    name = pg.application("migrate")
    pid = migrate.info.backend_pid
    pg.wait_state(pid, "idle in transaction")

    ls_cell, whole = ls_holder(("--pg", pg.dsn), f"{name} ")
    assert whole.startswith(f"{name} idle in transaction: SELECT pg_advisory_xact_lock"), whole
    assert f"{pid}@" not in ls_cell, ls_cell  # the name, not the pid, as the dashboard says

    def held_by_migrate(lock: Lock) -> bool:
        return lock.holder.pid == pid and lock.name == "46:5"

    dash_cell, width = await dashboard_holder({"pg_dsns": (pg.dsn,)}, pg.tag, held_by_migrate)
    same_holder(ls_cell, whole, dash_cell, width, name)
