"""The mysql source without a server: DSNs and passwords, ids, statements' secrets,
the verdict rules, the source's shape, and that `ls` on files never loads PyMySQL."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import LABEL_WIDTH, SourceError
from lockwatch.sources.lazy import LazySource
from lockwatch.sources.mysql.dsn import parse
from lockwatch.sources.mysql.facts import MyClient, MyLock, MySession, scrub_statement
from lockwatch.sources.mysql.lexer import Asked, waited_name
from lockwatch.sources.mysql.plugin import SOURCE
from lockwatch.sources.mysql.records import (
    Poll,
    build,
    lock_id,
    parse_id,
    table_of,
)
from lockwatch.sources.mysql.rules import evaluate_my
from lockwatch.sources.registry import by_name, for_id

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def test_the_source_is_one_registry_entry() -> None:
    # A lazy entry (sources/lazy.py): its plugin's SOURCE once the source is used.
    entry = by_name("mysql")
    assert isinstance(entry, LazySource) and entry.plugin is SOURCE
    assert len(SOURCE.label) <= LABEL_WIDTH
    assert for_id("mysql:root@127.0.0.1:3306:get_lock:7:held:x") is entry


def test_dsns_name_servers_without_their_passwords() -> None:
    endpoint = parse("mysql://app:p%40ss@db1:3307/shop", {})
    assert endpoint.name == "app@db1:3307" and endpoint.password == "p@ss"
    assert "p@ss" not in repr(endpoint) and endpoint.password_from == "dsn"
    sock = parse("mysql://mon@/x?socket=/run/mysqld/mysqld.sock", {"MYSQL_PWD": "pw"})
    assert sock.name == "mon@unix:/run/mysqld/mysqld.sock" and sock.password_from == "MYSQL_PWD"
    assert (
        parse("/run/mysqld/mysqld.sock", {"USER": "ops"}).name == "ops@unix:/run/mysqld/mysqld.sock"
    )
    with pytest.raises(SourceError) as bad:
        parse("postgres://u:hunter2@h/db", {})
    assert "hunter2" not in str(bad.value)
    args = endpoint.connect_args(3)
    assert args["connect_timeout"] == args["read_timeout"] == args["write_timeout"] == 3


def test_password_file_must_be_private(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    secret.chmod(0o644)
    with pytest.raises(SourceError):
        parse("mysql://u@h/", {}, password_file=str(secret))
    secret.chmod(0o600)
    assert parse("mysql://u@h/", {}, password_file=str(secret)).password == "s3cret"


def test_ids_round_trip_and_name_one_lock() -> None:
    made = lock_id("root@127.0.0.1:3306", "get_lock", 42, True, "a:b:c")
    parsed = parse_id(made)
    assert parsed is not None and parsed.target == "a:b:c" and parsed.thread == 42
    assert parsed.server == "root@127.0.0.1:3306" and parsed.held
    sock = parse_id("mysql:m@unix:/run/mysqld/mysqld.sock:metadata_lock:3:wait:test.t")
    assert sock is not None and sock.server == "m@unix:/run/mysqld/mysqld.sock"
    assert parse_id("mysql:nonsense") is None


def test_statements_are_read_as_written() -> None:
    assert waited_name("SELECT GET_LOCK('it''s', 10)", {}, 1) == "it's"
    assert isinstance(waited_name("SELECT GET_LOCK(@name, 10)", {}, 1), Asked)
    assert table_of("ALTER TABLE `shop`.`orders` ADD c INT", "x") == "shop.orders"
    assert table_of("SELECT * FROM orders WHERE id = 1", "shop") == "shop.orders"
    assert "hunter2" not in scrub_statement("ALTER USER 'a'@'%' IDENTIFIED BY 'hunter2'")
    assert "hunter2" not in MySession(1, query="SET PASSWORD = PASSWORD('hunter2')").query  # type: ignore[operator]


def _lock(my: MyLock, idle_after: float = 60.0) -> Lock:
    return Lock(
        id="mysql:x",
        source="mysql",
        format=my.kind,
        name=my.target,
        path=None,
        facts=dataclasses.replace(my, idle_after=idle_after),
    )


def _judge(my: MyLock) -> Verdict:
    """`my`'s verdict, its idle limit the source's default (60 s)."""
    lock = _lock(my)
    assert isinstance(lock.facts, MyLock)
    return evaluate_my(lock, lock.facts, NOW)


def test_rules_never_guess() -> None:
    idle = MySession(
        7, "app", "127.0.0.1:5000", command="Sleep", state_since=NOW - timedelta(hours=1)
    )
    held = MyLock("s", "get_lock", "X", True, idle, "job", blocking=(9,))
    verdict = _judge(held)
    assert verdict.state is State.STALE and {"idle_holder", "inferred", "blocking"} <= set(
        verdict.codes
    )
    alive = MyLock(
        "s",
        "get_lock",
        "X",
        True,
        MySession(
            7,
            "app",
            "127.0.0.1:5000",
            command="Sleep",
            state_since=NOW - timedelta(hours=1),
            client_process=MyClient(100, ("job",)),
        ),
        "job",
    )
    assert _judge(alive).state is State.ACTIVE
    gone = MyLock(
        "s", "get_lock", "X", True, MySession(7, client_process=MyClient(None, alive=False)), "job"
    )
    assert _judge(gone).codes[0] == "client_dead"
    hidden = MyLock(
        "s", "get_lock", "X", True, MySession(7, hidden=True, monitor_user="mon"), "job"
    )
    unknown = _judge(hidden)
    assert unknown.state is State.UNKNOWN and "GRANT PROCESS" in unknown.reasons[0].message
    head = MyLock(
        "s", "metadata_lock", "MDL_EXCLUSIVE", False, MySession(8), "t.x", queued_behind=3
    )
    assert _judge(head).codes == ("waiting", "ddl_queue")


def test_a_poll_at_thousands_of_rows_builds_one_session_each() -> None:
    processes = [
        (t, "app", f"10.0.0.1:{t}", "test", "Sleep", 1000.0, "", None, 5) for t in range(1, 51)
    ]
    mdl = [(1 + i % 50, "MDL_SHARED_NO_WRITE", 500, "User lock", f"k{i}", "") for i in range(5000)]
    started = time.perf_counter()
    locks = build(Poll("s", NOW, processes, [], [], mdl))
    took = time.perf_counter() - started
    assert len(locks) == 5000 and took < 2.0
    sessions = {id(lock.facts.session) for lock in locks if isinstance(lock.facts, MyLock)}
    assert len(sessions) == 50


def test_ls_on_files_never_imports_pymysql(tmp_path: Path) -> None:
    code = (
        "import atexit, os, sys\n"
        "def said(*_):\n    print('pymysql' in sys.modules, file=sys.stderr, flush=True)\n"
        "atexit.register(said)\n"
        "real_exit = os._exit\n"
        "os._exit = lambda code: (said(), real_exit(code))\n"
        "from lockwatch.cli import main\n"
        f"sys.argv = ['lockwatch', 'ls', '--json', {str(tmp_path)!r}]\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stderr.strip().splitlines()[-1] == "False", out.stderr


def test_recordings_carry_mysql_locks() -> None:
    from lockwatch.model import codec
    from lockwatch.sources.recording import know_sources

    know_sources()
    session = MySession(7, "app", "127.0.0.1:5000", command="Sleep", state_since=NOW)
    my = MyLock(
        "s", "innodb_row", "X", True, session, "t:PRIMARY:1", blocking=(8,), known_held_at=NOW
    )
    lock = _lock(my)
    assert codec.decode(codec.encode(lock)) == lock


def test_password_file_of_another_user_or_a_fifo_is_refused(tmp_path: Path) -> None:
    """A password file is a secret: another user's (here `nobody`'s, 0600) is not
    believed, and a FIFO is refused unopened (no hang), as lockwatch.trusted has it."""
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    theirs = tmp_path / "theirs"
    theirs.write_text("s3cret\n")
    theirs.chmod(0o600)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(SourceError, match="theirs"):
        parse("mysql://u@h/", {}, password_file=str(theirs))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(SourceError, match="FIFO"):
        parse("mysql://u@h/", {}, password_file=str(fifo))
