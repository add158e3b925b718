"""The demo on a server somebody named (`--pg DSN`): it creates its own table and
sessions there and nothing else, and leaves neither behind; and the guardian cleans up
after a demo that was SIGKILLed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockwatch.demo import Demo
from lockwatch.demo.postgres import APPLICATION
from tests.demo.conftest import birth, gone, wait_until
from tests.facts_of import PgLock, pg_of


def connect(dsn: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(dsn, autocommit=True, connect_timeout=5, application_name="lw-test")


def tables(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute(
        "SELECT schemaname || '.' || tablename FROM pg_tables"
        " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
    ).fetchall()
    return {row[0] for row in rows}


def sessions(conn: psycopg.Connection[Any], prefix: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT pid, application_name, state, wait_event_type FROM pg_stat_activity"
        " WHERE application_name LIKE %s",
        (prefix.replace("_", r"\_") + "%",),
    ).fetchall()


@pytest.mark.postgres
def test_a_named_server_gets_only_the_demos_table_and_sessions_and_loses_them(
    pg_db: str, tmp_path: Path
) -> None:
    with connect(pg_db) as admin:
        before = tables(admin)
        with Demo(pg_dsn=pg_db, base_dir=tmp_path) as demo:
            assert demo.pg_info is not None and not demo.pg_info.embedded
            assert demo.dsns == (pg_db,) and demo.pg_info.postmaster_pid is None
            assert tables(admin) - before == {f"public.{demo.pg_info.table}"}
            assert demo.pg_info.table.startswith("lockwatch_demo_")
            mine = sessions(admin, demo.pg_info.application)
            assert len(mine) == demo.pg_info.sessions + 1 == 13  # and the demo's admin session
            assert demo.pg_info.application.startswith(f"{APPLICATION}-")
            waiting = [row for row in mine if row[3] == "Lock"]
            assert len(waiting) == 6  # 2 advisory, 2 on the held row, 2 down the chain
            assert sum(row[2] == "idle in transaction" for row in mine) >= 2
            # The names in the workspace's lockwatch.toml are the keys the demo took.
            names = demo.config.source("postgres").advisory
            assert "billing-sync" in names.keys.values()
            assert "agent" in names.namespaces.values()
        assert tables(admin) == before
        assert sessions(admin, f"{APPLICATION}-{demo.tag}") == []
    assert any(f"dropped table {demo.pg_info.table}" in line for line in demo.report), demo.report


def test_the_guardian_cleans_up_after_a_demo_killed_with_sigkill(tmp_path: Path) -> None:
    """The demo's process dies without a chance to clean up: its children notice their
    parent is gone, and the guardian stops the embedded server (when there is one) and
    removes the workspace."""
    script = textwrap.dedent(
        f"""
        import json, time
        from pathlib import Path
        from lockwatch.demo import Demo
        demo = Demo(base_dir=Path({str(tmp_path)!r}))
        demo.start()
        print(json.dumps({{
            "pids": demo.pids,
            "workspace": str(demo.workspace.root),
            "datadir": str(demo.pg_info.datadir) if demo.pg_info and demo.pg_info.datadir else None,
        }}), flush=True)
        time.sleep(120)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert parent.stdout is not None
        started = json.loads(parent.stdout.readline())
        processes = {pid: birth(pid) for pid in started["pids"]}
        assert Path(started["workspace"]).is_dir()
    finally:
        parent.kill()
        parent.wait(10)
    wait_until(
        lambda: all(gone(pid, created) for pid, created in processes.items()),
        "every process of the killed demo to go",
        timeout=20,
    )
    wait_until(lambda: not Path(started["workspace"]).exists(), "the workspace to go")
    if started["datadir"]:
        wait_until(lambda: not Path(started["datadir"]).exists(), "the server's data to go")


@pytest.mark.postgres
def test_on_a_named_server_only_the_demos_own_sessions_can_be_acted_on(
    pg_db: str, tmp_path: Path
) -> None:
    from lockwatch.actions.plan import Kind
    from lockwatch.cli.demo import demo_app
    from lockwatch.clock import SystemClock
    from lockwatch.model.process import StaticProcesses
    from lockwatch.model.verdict import evaluate
    from lockwatch.sources.postgres.listing import make_sources, poll_once

    with (
        connect(pg_db) as admin,
        psycopg.connect(pg_db, autocommit=True, application_name="production-app") as theirs,
    ):
        theirs.execute("SELECT pg_advisory_lock(55501)")
        with Demo(pg_dsn=pg_db, base_dir=tmp_path) as demo:
            app = demo_app(demo, host="demo-host")
            assert app.actions is not None
            settings = demo.config.source("postgres")
            (source,) = make_sources(demo.dsns, replace(settings, idle_after=0.0))
            poll_once([source])
            assert source.last is not None
            locks = source.last.locks

            def plan_for(application: str) -> Any:
                lock = next(
                    lock
                    for lock in locks
                    if isinstance(lock.facts, PgLock)
                    and pg_of(lock).granted
                    and (pg_of(lock).backend.application or "").startswith(application)
                )
                verdict = evaluate(lock, StaticProcesses(), SystemClock(), "demo-host")
                return app.actions.plan(Kind.BREAK, lock, verdict, locks)  # type: ignore[union-attr]

            foreign = plan_for("production-app")
            assert foreign.refusal is not None and foreign.refusal[0] == "not_ours"
            assert plan_for(demo.pg_info.application).refusal is None  # type: ignore[union-attr]
        # The foreign session was never touched.
        assert admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s",
            (theirs.info.backend_pid,),
        ).fetchone() == (1,)
