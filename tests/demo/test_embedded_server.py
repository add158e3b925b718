"""The demo's throwaway PostgreSQL must not change the system: as root it runs
the machine's own binaries as an account that already exists, never creating
one (pgserver would `useradd pgserver`)."""

from __future__ import annotations

import os
import pwd

import psutil
import psycopg
import pytest

from lockwatch.demo.pg_server import RUN_AS, EmbeddedServer, pgserver_problem

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the root path only")


def test_as_root_no_account_is_created_and_the_server_runs_as_an_existing_one() -> None:
    assert pgserver_problem() is None
    accounts = {entry.pw_name for entry in pwd.getpwall()}
    server = EmbeddedServer.start()
    try:
        assert server.postmaster_pid is not None
        owner = psutil.Process(server.postmaster_pid).username()
        assert owner in RUN_AS and owner in accounts
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT current_setting('server_encoding')").fetchone()
            assert row == ("UTF8",)
    finally:
        server.close()
    assert {entry.pw_name for entry in pwd.getpwall()} == accounts
    assert not server.datadir.exists()
    assert not psutil.pid_exists(server.postmaster_pid)
