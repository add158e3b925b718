"""`serve --pg-log` (issue 44, item 7): `lockwatch serve` follows the log a
real private PostgreSQL cluster writes (`log_lock_waits = on`) while it
records, and a real `lock_timeout` that happens meanwhile shows on
/v1/history as a wait from the log, within the same episodes `history`
answers with."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from tests.postgres.conftest import Cluster
from tests.postgres.test_logfold import _logged, _pid, _until, logging_cluster

__all__ = ["logging_cluster"]  # the fixture, used by name below

TOKEN = "pg-log-follow-token-0123456789"
WAIT_S = 60.0  # a bound under a loaded machine, never a timing assertion


@pytest.fixture
def serving(logging_cluster: Cluster, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`lockwatch serve --pg-log` on the cluster's log, recording into a file."""
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    (tmp_path / "locks").mkdir()
    history = tmp_path / "history.sqlite3"
    args = ["--kernel", str(tmp_path / "locks"), "--listen", "127.0.0.1:0", "--refresh", "0.2"]
    args += ["--token-file", str(token), "--history", str(history)]
    args += ["--pg-log", str(logging_cluster.logfile), "--pg-server", "db"]
    serve = subprocess.Popen(
        [sys.executable, "-m", "lockwatch", "serve", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert serve.stderr is not None
        line = serve.stderr.readline().decode()
        found = re.search(r"listening on (http://\S+)", line)
        assert found, line
        yield found[1], history
    finally:
        serve.terminate()
        serve.wait(60)


def _episodes(url: str) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"{url}/v1/history?since=-1h")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=30) as answer:
        found: list[dict[str, Any]] = orjson.loads(answer.read())["episodes"]
        return found


def test_serve_follows_the_log_into_its_history(
    logging_cluster: Cluster, serving: tuple[str, Path]
) -> None:
    url, history = serving
    holder = psycopg.connect(logging_cluster.dsn)
    waiter = psycopg.connect(logging_cluster.dsn)
    try:
        holder_pid, waiter_pid = _pid(holder), _pid(waiter)
        holder.execute("UPDATE lw_logfold SET v = 3 WHERE id = 1")
        waiter.execute("SET lock_timeout = '400ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            waiter.execute("UPDATE lw_logfold SET v = 4 WHERE id = 1")
        waiter.rollback()
        holder.commit()
        # A line after the error: the server logs its STATEMENT; either way the
        # follower hands the ended wait over at its next round.
        _until(lambda: _logged(logging_cluster, "due to lock timeout"), "the logged timeout")
    finally:
        holder.close()
        waiter.close()

    def ours() -> list[dict[str, Any]]:
        return [
            e
            for e in _episodes(url)
            if "log" in e["origins"]
            and e["blocker"]["pid"] == holder_pid
            and any(w["pid"] == waiter_pid for w in e["waiters"])
        ]

    deadline = time.monotonic() + WAIT_S
    while not ours():
        assert time.monotonic() < deadline, "no log-origin episode on /v1/history"
        time.sleep(0.1)
    (episode,) = ours()
    assert episode["server"] == "db" and episode["source"] == "postgres"
    (wait,) = [w for w in episode["waiters"] if w["pid"] == waiter_pid]
    assert wait["outcome"] == "timeout"
    from tests.conftest import run_cli

    code, out, err = run_cli("history", "--history", str(history), "--since", "-1h", "--json")
    assert code == 0, err
    assert episode["id"] in {e["id"] for e in orjson.loads(out)["episodes"]}


def test_serve_refuses_a_log_it_cannot_follow_in_one_line(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    real = tmp_path / "server.log"
    real.write_text("")
    link = tmp_path / "link.log"
    link.symlink_to(real)
    for log in (link, tmp_path / "missing.log"):
        code, _, err = run_cli("serve", "--kernel", str(tmp_path), "--pg-log", str(log))
        assert code == 2 and "--pg-log" in err and "Traceback" not in err, err
    code, _, err = run_cli(
        "serve", "--kernel", str(tmp_path), "--no-history", "--pg-log", str(real)
    )
    assert code == 2 and "--no-history" in err, err


def test_the_dashboard_and_serve_teach_pg_log_in_their_help() -> None:
    from tests.conftest import run_cli

    for command in ("watch", "serve", "history"):
        code, out, _ = run_cli(command, "--help")
        assert code == 0 and "--pg-log FILE" in out and "--pg-server NAME" in out, command
