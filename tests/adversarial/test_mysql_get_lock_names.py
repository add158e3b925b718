"""Issue 47 item 2: which named lock a MariaDB session waits for is read from its
statement as MySQL's lexer reads it. A GET_LOCK in a comment or a string is no
call, a name's escapes (`\\n`, `\\r`, `\\0`) are the characters they stand for, and
where the statement cannot tell (a variable, an introduced literal) the waiter
is `unknown` and put behind nobody: never behind an innocent holder.

Against the real MariaDB (tests/mysql's harness: sessions killed at teardown),
with the metadata_lock_info plugin and without it (IS_USED_LOCK of the names the
statements give)."""

from __future__ import annotations

import pytest

from lockwatch.clock import SystemClock
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.mysql.facts import MyLock
from lockwatch.sources.mysql.lexer import get_lock_calls
from lockwatch.sources.mysql.server import MyServer
from tests.mysql.conftest import (  # noqa: F401 - fixtures, used by name
    GROUP,
    MyHarness,
    metadata_lock_info,
    my,
    my_dsn,
    no_metadata_lock_info,
    tid,
)

pytestmark = [pytest.mark.mysql, GROUP]
PLUGINS = ["metadata_lock_info", "no_metadata_lock_info"]


def locks_of(harness: MyHarness, threads: set[int]) -> list[tuple[Lock, MyLock, Verdict]]:
    server = MyServer(harness.endpoint, client_finder=None)
    try:
        polled = server.poll()
    finally:
        server.close()
    assert polled.locks is not None, polled.statuses
    out = []
    for lock in polled.locks:
        facts = lock.facts
        if isinstance(facts, MyLock) and facts.session.thread_id in threads:
            out.append((lock, facts, evaluate(lock, StaticProcesses(), SystemClock(), "h")))
    return out


def waiter_of(found: list[tuple[Lock, MyLock, Verdict]], thread: int) -> tuple[MyLock, Verdict]:
    (hit,) = [(f, v) for _, f, v in found if f.session.thread_id == thread and not f.granted]
    return hit


def held_by(found: list[tuple[Lock, MyLock, Verdict]], thread: int) -> list[MyLock]:
    return [f for _, f, _ in found if f.session.thread_id == thread and f.granted]


@pytest.mark.parametrize("plugin", PLUGINS)
@pytest.mark.parametrize(
    "decoy",
    [
        "SELECT /* GET_LOCK('{victim}', 1) */ GET_LOCK('{real}', 60)",
        "SELECT -- GET_LOCK('{victim}', 1)\n GET_LOCK('{real}', 60)",
        "SELECT # GET_LOCK('{victim}', 1)\n GET_LOCK('{real}', 60)",
        "SELECT 'GET_LOCK(''{victim}'', 1)', GET_LOCK('{real}', 60)",
        "SELECT \"GET_LOCK('{victim}', 1)\", GET_LOCK('{real}', 60)",
    ],
)
def test_a_decoy_blames_no_innocent_session(
    my: MyHarness,  # noqa: F811 - the fixture imported above
    plugin: str,
    decoy: str,
    request: pytest.FixtureRequest,
) -> None:
    request.getfixturevalue(plugin)
    innocent, holder, waiter = my.session(), my.session(), my.session()
    victim, real = f"{my.prefix}-victim-lock", f"{my.prefix}-real-lock"
    my.run(innocent, f"SELECT GET_LOCK('{victim}', 0)")
    my.run(holder, f"SELECT GET_LOCK('{real}', 0)")
    my.background(waiter, decoy.format(victim=victim, real=real))
    my.waiting(waiter, "User lock")
    found = locks_of(my, {tid(innocent), tid(holder), tid(waiter)})
    wait, verdict = waiter_of(found, tid(waiter))
    assert (wait.target, wait.blocked_by) == (real, (tid(holder),))
    assert verdict.state is State.WAITING
    (real_held,) = held_by(found, tid(holder))
    assert real_held.blocking == (tid(waiter),)
    assert all(not f.blocking for f in held_by(found, tid(innocent)))


@pytest.mark.parametrize("plugin", PLUGINS)
def test_escapes_in_a_name_are_the_characters_they_stand_for(
    my: MyHarness,  # noqa: F811 - the fixture imported above
    plugin: str,
    request: pytest.FixtureRequest,
) -> None:
    request.getfixturevalue(plugin)
    holder, waiter = my.session(), my.session()
    spelled = f"{my.prefix}line1\\nline2\\rCR\\0nul\\tq\\'\\\\z"
    my.run(holder, f"SELECT GET_LOCK('{spelled}', 0)")
    my.background(waiter, f"SELECT GET_LOCK('{spelled}', 60)")
    my.waiting(waiter, "User lock")
    (name,) = get_lock_calls(f"SELECT GET_LOCK('{spelled}', 1)").calls
    assert name == f"{my.prefix}line1\nline2\rCR\0nul\tq'\\z"
    (used,) = my.admin_rows("SELECT IS_USED_LOCK(%s)", (name,))
    assert used == (tid(holder),)  # the server's own reading of the same name
    found = locks_of(my, {tid(holder), tid(waiter)})
    wait, verdict = waiter_of(found, tid(waiter))
    assert (wait.target, wait.blocked_by) == (name, (tid(holder),))
    assert verdict.state is State.WAITING
    (held,) = held_by(found, tid(holder))
    assert held.target == name and held.blocking == (tid(waiter),)


@pytest.mark.parametrize("plugin", PLUGINS)
@pytest.mark.parametrize(
    "asked",
    [
        "SELECT GET_LOCK(@{prefix}_n, 60)",
        "SELECT GET_LOCK(_utf8mb4'{name}', 60)",
        "SELECT GET_LOCK(CONCAT('{name}', ''), 60)",
    ],
)
def test_a_name_the_statement_cannot_tell_is_unknown_and_blames_nobody(
    my: MyHarness,  # noqa: F811 - the fixture imported above
    plugin: str,
    asked: str,
    request: pytest.FixtureRequest,
) -> None:
    request.getfixturevalue(plugin)
    holder, waiter = my.session(), my.session()
    name = f"{my.prefix}-by-variable"
    my.run(holder, f"SELECT GET_LOCK('{name}', 0)")
    my.run(waiter, f"SET @{my.prefix}_n = '{name}'")
    my.background(waiter, asked.format(prefix=my.prefix, name=name))
    my.waiting(waiter, "User lock")
    found = locks_of(my, {tid(holder), tid(waiter)})
    wait, verdict = waiter_of(found, tid(waiter))
    assert verdict.state is State.UNKNOWN and verdict.codes[0] == "name_unread"
    assert wait.blocked_by == () and wait.waits() == (f"thread {tid(waiter)}", ())
    assert all(not f.blocking for f in held_by(found, tid(holder)))
