"""One holder name in every view (issue 46, item 5), on a real MariaDB: `ls
--mysql`'s HOLDER said `thread 142 (root)`, its client and its idle transaction
only in the tree and the JSON. Both tables take HOLDER from one column model:
the thread, what it is doing, its account and its client process, the same in
`ls` and in the dashboard (Pilot)."""

from __future__ import annotations

import os

import pytest

from lockwatch.model.lock import Lock
from lockwatch.sources.mysql.facts import MyLock
from tests.holder_cells import dashboard_holder, ls_holder, same_holder
from tests.mysql.conftest import GROUP, MyHarness, tid

pytestmark = [pytest.mark.mysql, GROUP]


async def test_ls_and_the_dashboard_name_a_thread_alike(my: MyHarness) -> None:
    table = my.table("holder_cell")
    my.admin_rows(f"INSERT INTO {table} VALUES (1, 0)")
    holder, waiter = my.session(), my.session()
    my.run(holder, "START TRANSACTION")
    my.run(holder, f"SELECT * FROM {table} WHERE id = 1 FOR UPDATE")
    my.background(waiter, f"SELECT * FROM {table} WHERE id = 1 FOR UPDATE")
    my.waiting(waiter)
    thread = tid(holder)
    label = f"thread {thread}"

    ls_cell, whole = ls_holder(("--mysql", my.dsn), f"{label} ")
    # What it is doing, whose it is and which process: this test's own.
    assert whole.startswith(f"{label} idle in transaction · root@"), whole
    assert f"(pid {os.getpid()})" in whole, whole

    def held_by_thread(lock: Lock) -> bool:
        facts = lock.facts
        return isinstance(facts, MyLock) and facts.granted and facts.session.thread_id == thread

    dash_cell, width = await dashboard_holder({"mysql_dsns": (my.dsn,)}, table, held_by_thread)
    same_holder(ls_cell, whole, dash_cell, width, label)
