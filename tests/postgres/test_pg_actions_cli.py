"""`lockwatch break | steal | release | cancel` on Postgres lock ids, against a real
server: ids come from `lockwatch ls --json`, as an operator's script would get them.

`steal` holds the key in the foreground, so it runs as a real process (Popen): it
is killed, and lockwatch's session on the server ended, whatever the test did.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from psycopg import conninfo

from lockwatch.actions.audit import read_records, verify
from lockwatch.sources.postgres.actor import HOLD_APPLICATION
from lockwatch.sources.postgres.dsn import display_name
from lockwatch.sources.postgres.facts import AdvisoryKey
from tests.conftest import run_cli
from tests.postgres.conftest import WAIT_S, PgHarness, terminate, wait_until
from tests.postgres.test_pg_actions import (
    alive,
    bigint,
    holders,
    lockwatch_sessions,
    pair,
    unprivileged_role,
)

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
# Where libpq would otherwise look for a server: none of it may leak into these runs.
CLEAN_ENV: dict[str, str | None] = {
    name: None
    for name in ("LOCKWATCH_PG", "LOCKWATCH_READONLY", "PGHOST", "PGPORT", "PGUSER",
                 "PGDATABASE", "PGSERVICE", "PGHOSTADDR")
}  # fmt: skip


@dataclass
class Cli:
    """`lockwatch` for one test: a private audit log and config (idle_after)."""

    pg: PgHarness
    log: Path
    config: Path
    tmp: Path

    def run(self, *args: str, pg: str | None = None) -> tuple[int, str, str]:
        extra = ["--pg", pg] if pg else []
        # CliRunner unsets a variable given as None.
        env = cast(dict[str, str], dict(CLEAN_ENV))
        return run_cli(*args, "--config", str(self.config), *extra, env=env)

    def act(
        self, verb: str, target: str, *args: str, pg: str | None = None
    ) -> tuple[int, str, str]:
        return self.run(verb, target, "--yes", "--audit-log", str(self.log), *args, pg=pg)

    def ls(self, pg: str | None = None) -> list[dict[str, Any]]:
        code, out, err = self.run("ls", "--json", pg=pg or self.pg.dsn)
        assert code in (0, 3), err  # 3: something is stale
        locks: list[dict[str, Any]] = json.loads(out)["locks"]
        return locks

    def lock(
        self, pid: int, name: str, *, granted: bool = True, pg: str | None = None
    ) -> dict[str, Any]:
        found = [
            lock
            for lock in self.ls(pg)
            if lock["holder"]["pid"] == pid and lock["name"] == name and lock["granted"] is granted
        ]
        assert len(found) == 1, found
        return found[0]

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        found = [record for _, record, _ in read_records(self.log)]
        assert all(record is not None for record in found)
        assert verify(self.log).ok, verify(self.log)
        return [record for record in found if record is not None]

    def events(self) -> list[str]:
        return [record["event"] for record in self.records()]


def make_cli(pg: PgHarness, tmp_path: Path, idle_after: float) -> Cli:
    config = tmp_path / f"lockwatch-{idle_after}.toml"
    config.write_text(f"[postgres]\nidle_after = {idle_after}\n")
    return Cli(pg, tmp_path / "audit.jsonl", config, tmp_path)


@pytest.fixture
def cli(pg: PgHarness, tmp_path: Path) -> Cli:
    """Holders count as stale after 60 s idle: the locks of a test are active."""
    return make_cli(pg, tmp_path, 60)


@pytest.fixture
def eager(pg: PgHarness, tmp_path: Path) -> Cli:
    """Holders idle for 0.1 s are stale (unless their client is seen alive)."""
    return make_cli(pg, tmp_path, 0.1)


def orphaned_holder(pg: PgHarness, take: str) -> int:
    """A holder whose program took a lock, started a long query and was killed: its
    backend runs on, holding the lock, with its client gone. Its backend pid."""
    client = pg.client_process(("holder", [take]), then=(0, "SELECT pg_sleep(600)"))
    client.kill()
    (h,) = client.backends
    return h


# --------------------------------------------------------------------------- break


def test_break_an_active_lock_needs_force_then_terminates_the_holder(cli: Cli) -> None:
    pg = cli.pg
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(31, 1)")
    blocked = pg.block(waiter, "SELECT pg_advisory_lock(31, 1)")
    listed = cli.lock(h, "31:1")
    assert listed["state"] == "active"
    target = listed["id"]
    assert target.startswith(f"pg:{display_name(pg.dsn)}:{h}:advisory/")
    assert target.endswith(":ExclusiveLock:held")

    code, out, err = cli.act("break", target, "--reason", "hung deploy", pg=pg.dsn)
    assert code == 1, (out, err)
    assert "refused" in err and "--force" in err
    assert alive(pg, h) and not blocked.done.is_set()

    code, out, err = cli.act(
        "break", target, "--reason", "hung deploy", "--force", "--json", pg=pg.dsn
    )
    assert code == 0, (out, err)
    payload = json.loads(out)
    assert payload["ok"] is True and payload["event"] == "backend_terminated"
    assert payload["audited"] is True
    assert payload["message"] == f"terminated pid {h} on {display_name(pg.dsn)}"
    assert not alive(pg, h)
    blocked.wait_done()
    assert blocked.error is None
    assert holders(pg, pair(31, 1)) == [(w, pg.application("waiter"), "ExclusiveLock")]

    records = cli.records()
    assert [r["event"] for r in records] == [
        "action_refused",
        "action_intent",
        "backend_terminated",
    ]
    refused, _, done = records
    assert refused["code"] == "not_stale" and refused["forced"] is False
    assert done["forced"] is True and done["reason"] == "hung deploy"
    assert done["target"]["id"] == target and done["target"]["pid"] == h
    assert done["previous_lock"]["pid"] == h
    assert done["previous_lock_hash"].startswith("sha256:")
    assert f"waiter {w} ({pg.application('waiter')}) proceeds" in done["effect"]


def test_break_a_stale_lock_by_the_ids_own_server_name(eager: Cli) -> None:
    """Without --pg, the id's user@host:port/db is the server (libpq does the rest)."""
    pg = eager.pg
    h = orphaned_holder(pg, "SELECT pg_advisory_lock(32)")
    listed = eager.lock(h, "32")
    assert listed["state"] == "stale"
    assert [r["code"] for r in listed["reasons"]] == ["client_dead"]

    code, out, err = eager.act("break", listed["id"], "--reason", "leaked")
    assert code == 0, (out, err)
    assert not alive(pg, h)
    assert holders(pg, bigint(32)) == []
    assert eager.events() == ["action_intent", "backend_terminated"]


def test_break_of_an_id_that_is_gone_is_refused_and_audited(cli: Cli) -> None:
    pg = cli.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(33)")
    target = cli.lock(h, "33")["id"]
    terminate(pg.admin, [h])

    code, out, err = cli.act("break", target, "--reason", "cleanup", "--force", pg=pg.dsn)

    assert code == 1, (out, err)
    assert "refused" in err and f"no lock {target}" in err
    (record,) = cli.records()
    assert record["event"] == "action_refused" and record["code"] == "not_found"
    assert record["target"]["id"] == target and record["target"]["source"] == "postgres"
    assert target.startswith(f"pg:{record['target']['server']}:")
    assert record["reason"] == "cleanup" and record["action"] == "break"


def test_a_lock_that_changed_holder_is_a_different_id(cli: Cli) -> None:
    """Another pid took the key since it was listed: the id named the old holder."""
    pg = cli.pg
    holder, other = pg.sessions("holder", "other")
    h, o = holder.info.backend_pid, other.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(34)")
    target = cli.lock(h, "34")["id"]
    holder.execute("SELECT pg_advisory_unlock(34)")
    other.execute("SELECT pg_advisory_lock(34)")

    code, _, err = cli.act("break", target, "--reason", "x", "--force", pg=pg.dsn)

    assert code == 1 and "no lock" in err
    assert alive(pg, h) and alive(pg, o)
    assert holders(pg, bigint(34)) == [(o, pg.application("other"), "ExclusiveLock")]
    assert cli.events() == ["action_refused"]


@pytest.mark.parametrize(
    "target",
    ["pg:nonsense", "pg:postgres@127.0.0.1/db:1:advisory"],
)
def test_a_malformed_pg_id_is_a_usage_error(cli: Cli, target: str) -> None:
    code, _, err = cli.act("break", target, "--reason", "x")
    assert code == 2 and "not a Postgres lock id" in err
    assert cli.events() == []


def test_without_a_reason_nothing_is_done(cli: Cli) -> None:
    pg = cli.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(35)")
    target = cli.lock(h, "35")["id"]
    code, _, err = cli.act("break", target, "--force", pg=pg.dsn)
    assert code == 2 and "--reason is required" in err
    assert alive(pg, h)


def test_without_pg_signal_backend_break_fails_naming_it(cli: Cli) -> None:
    pg = cli.pg
    role_dsn = unprivileged_role(pg, "cli")
    holder = pg.session("holder")  # a superuser's session
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(36)")
    listed = cli.lock(h, "36", pg=role_dsn)
    assert listed["id"].startswith(f"pg:{display_name(role_dsn)}:")

    code, out, err = cli.act("break", listed["id"], "--reason", "try", "--force", pg=role_dsn)

    assert code == 3, (out, err)
    assert "failed" in err and "pg_signal_backend" in err
    assert alive(pg, h)
    records = cli.records()
    assert [r["event"] for r in records] == ["action_intent", "action_failed"]
    assert records[1]["code"] == "insufficient_privilege"


# --------------------------------------------------------------------------- cancel


def test_cancel_a_waiting_session_by_id(cli: Cli) -> None:
    pg = cli.pg
    holder, waiter = pg.sessions("holder", "waiter")
    h, w = holder.info.backend_pid, waiter.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(37)")
    blocked = pg.block(waiter, "SELECT pg_advisory_lock(37)")
    listed = cli.lock(w, "37", granted=False)
    assert listed["state"] == "waiting" and listed["id"].endswith(":wait")

    code, out, err = cli.act("cancel", listed["id"], "--reason", "queue jam", pg=pg.dsn)

    assert code == 0, (out, err)
    assert out.strip() == f"cancelled the query of pid {w} on {display_name(pg.dsn)}"
    blocked.wait_done()
    assert isinstance(blocked.error, psycopg.errors.QueryCanceled)
    assert waiter.execute("SELECT pg_backend_pid()").fetchone() == (w,)
    assert alive(pg, h)
    assert cli.events() == ["action_intent", "backend_cancelled"]


# --------------------------------------------------------------------------- steal and release


HOLD_BOUND_S = 120.0


@contextlib.contextmanager
def steal_process(cli: Cli, target: str, key: AdvisoryKey) -> Iterator[subprocess.Popen[bytes]]:
    """`lockwatch steal TARGET` in the foreground, returned once pg_locks shows
    lockwatch's own session holding `key` and the command says it holds it (from
    then on Ctrl+C releases it). Killed on the way out if still running, and its
    session on the server ended."""
    stderr = cli.tmp / "steal.err"
    with stderr.open("wb") as err, (cli.tmp / "steal.out").open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "lockwatch", "steal", target,
                "--reason", "leaked lock, INC-42", "--yes",
                "--pg", cli.pg.dsn, "--audit-log", str(cli.log), "--config", str(cli.config),
            ],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            env=_env(),
        )  # fmt: skip
    try:
        wait_until(
            lambda: (
                process.poll() is not None
                or (
                    "holding " in stderr.read_text(errors="replace")
                    and any(app.startswith(HOLD_APPLICATION) for _, app, _ in holders(cli.pg, key))
                )
            ),
            "lockwatch steal to hold the key",
            # The event (its line, and its session in pg_locks) ends the wait; this
            # only keeps a broken steal from hanging the suite. A loaded 2-core
            # machine took over 20 s to start a Python process and connect.
            timeout=HOLD_BOUND_S,
        )
        assert process.poll() is None, (
            f"steal exited {process.returncode}: {stderr.read_text(errors='replace')}"
        )
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(WAIT_S)
        with contextlib.suppress(psycopg.Error):
            terminate(cli.pg.admin, lockwatch_sessions(cli.pg))


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def stale_holder(cli: Cli, take: str, name: str) -> tuple[int, str]:
    h = orphaned_holder(cli.pg, take)
    listed = cli.lock(h, name)
    assert listed["state"] == "stale"
    return h, listed["id"]


@pytest.mark.parametrize(
    "signum", [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]
)
def test_steal_holds_the_key_until_interrupted_then_releases(
    eager: Cli, signum: signal.Signals
) -> None:
    pg = eager.pg
    key = pair(41, signum.value)
    h, target = stale_holder(eager, f"SELECT pg_advisory_lock(41, {signum.value})", str(key))

    with steal_process(eager, target, key) as process:
        assert not alive(pg, h)
        ((mine, app, mode),) = holders(pg, key)
        assert app.startswith(f"{HOLD_APPLICATION}:") and mode == "ExclusiveLock"
        assert lockwatch_sessions(pg) == [mine]
        process.send_signal(signum)
        assert process.wait(WAIT_S) == 0

    err = (eager.tmp / "steal.err").read_text()
    assert f"holding {key} as lockwatch session {mine}" in err
    assert holders(pg, key) == []
    wait_until(lambda: lockwatch_sessions(pg) == [], "lockwatch's session to end")
    out = (eager.tmp / "steal.out").read_text()
    assert f"terminated pid {h} and took {key}" in out
    assert f"released {key} on {display_name(pg.dsn)}" in out
    records = eager.records()
    assert [r["event"] for r in records] == [
        "action_intent",
        "backend_terminated",
        "lock_stolen",
        "action_intent",
        "lock_released",
    ]
    assert records[1]["pid"] == h and records[1]["target"]["id"] == target
    assert records[2]["terminated_pid"] == h and records[2]["held_by_pid"] == mine
    assert records[2]["target"]["id"] == target
    released = records[4]
    assert released["reason"] == "leaked lock, INC-42 (released on exit)"
    assert released["unlocked"] is True
    # What was released is lockwatch's own lock, not the terminated holder's.
    assert released["target"]["pid"] == mine
    assert released["target"]["id"] == f"pg:{display_name(pg.dsn)}:{mine}:{target.split(':', 4)[4]}"
    assert released["previous_lock"]["pid"] == mine
    assert released["state"] == "active"


def test_steal_then_lockwatch_release_from_another_process(eager: Cli) -> None:
    pg = eager.pg
    key = bigint(-(2**62) - 5)
    h, target = stale_holder(eager, f"SELECT pg_advisory_lock({key.key})", str(key))

    with steal_process(eager, target, key) as process:
        ((mine, _, _),) = holders(pg, key)
        listed = eager.lock(mine, str(key))
        assert listed["holder"]["session"].startswith(f"{HOLD_APPLICATION}:")
        new_id = listed["id"]
        # `lockwatch release` of a lock lockwatch does not hold is refused.
        other = pg.session("other")
        other.execute("SELECT pg_advisory_lock(42)")
        code, _, err = eager.act(
            "release", eager.lock(other.info.backend_pid, "42")["id"], "--reason", "x",
            pg=pg.dsn,
        )  # fmt: skip
        assert code == 1 and "lockwatch does not hold" in err

        code, out, err = eager.act("release", new_id, "--reason", "done", pg=pg.dsn)
        assert code == 0, (out, err)
        assert process.wait(WAIT_S) == 0

    err = (eager.tmp / "steal.err").read_text()
    assert f"lockwatch release '{new_id}'" in err  # the id it announced is the listed one
    assert "the lock was released" in err
    assert holders(pg, key) == []
    assert lockwatch_sessions(pg) == []
    assert not alive(pg, h)
    records = eager.records()
    assert [r["event"] for r in records] == [
        "action_intent",
        "backend_terminated",
        "lock_stolen",
        "action_refused",
        "action_intent",
        # Releasing it from here ends lockwatch's steal session: a backend terminated.
        "backend_terminated",
        "lock_released",
    ]
    assert records[5]["pid"] == mine and records[5]["action"] == "release"
    released = records[6]
    assert released["target"]["id"] == new_id and released["target"]["pid"] == mine
    assert released["reason"] == "done"


def test_steal_of_an_active_lock_is_refused(cli: Cli) -> None:
    pg = cli.pg
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(43)")
    listed = cli.lock(h, "43")
    assert listed["state"] == "active"

    code, out, err = cli.act("steal", listed["id"], "--reason", "mine now", pg=pg.dsn)

    assert code == 1, (out, err)
    assert "never allowed" in err
    assert alive(pg, h) and lockwatch_sessions(pg) == []
    assert holders(pg, bigint(43)) == [(h, pg.application("holder"), "ExclusiveLock")]
    (record,) = cli.records()
    assert record["event"] == "action_refused" and record["code"] == "not_stale"


def test_steal_with_a_queued_waiter_is_refused_and_nothing_is_terminated(eager: Cli) -> None:
    pg = eager.pg
    h, target = stale_holder(eager, "SELECT pg_advisory_lock(44)", "44")
    waiter = pg.session("waiter")
    w = waiter.info.backend_pid
    blocked = pg.block(waiter, "SELECT pg_advisory_lock(44)")

    code, out, err = eager.act("steal", target, "--reason", "x", pg=pg.dsn)

    # The waiter would be served first: a steal could only end the holder.
    assert code == 1, (out, err)
    assert "refused" in err and f"pid {w}" in err and "Break it instead" in err
    assert alive(pg, h) and not blocked.done.is_set()
    assert holders(pg, bigint(44)) == [(h, pg.application("holder"), "ExclusiveLock")]
    assert lockwatch_sessions(pg) == []
    (refused,) = eager.records()
    assert refused["event"] == "action_refused" and refused["code"] == "has_waiters"
    # Breaking it is what lets the waiter in.
    code, out, err = eager.act("break", target, "--reason", "x", pg=pg.dsn)
    assert code == 0, (out, err)
    blocked.wait_done()
    assert holders(pg, bigint(44)) == [(w, pg.application("waiter"), "ExclusiveLock")]


def test_the_password_in_pg_is_never_printed_or_audited(cli: Cli) -> None:
    pg = cli.pg
    secret = "pw-never-shown-5e1"
    dsn = conninfo.make_conninfo(pg.dsn, password=secret)
    holder = pg.session("holder")
    h = holder.info.backend_pid
    holder.execute("SELECT pg_advisory_lock(45)")
    target = cli.lock(h, "45", pg=dsn)["id"]
    code, out, err = cli.act("break", target, "--reason", "x", "--force", pg=dsn)
    assert code == 0, (out, err)
    assert secret not in out + err + target
    assert secret not in cli.log.read_text()
