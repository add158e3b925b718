"""`lockwatch history`, `history show`, `ls --at` and `why --at` as a user runs
them (subprocesses), over a history that recorded a real flock wait."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.history.flock_wait import Waited, record_a_flock_wait

FIELDS = {
    "id",
    "source",
    "server",
    "resource",
    "start",
    "end",
    "blocker",
    "waiters",
    "peak_waiters",
    "longest_wait_seconds",
    "waiter_seconds",
    "ended_by",
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Waited]:
    where = tmp_path_factory.mktemp("cli")
    locks = where / "locks"
    locks.mkdir()
    history = where / "history.sqlite3"
    return history, record_a_flock_wait(locks, str(history))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", *args], capture_output=True, text=True, check=False
    )


def test_history_json_has_the_fields_of_the_contract(recorded: tuple[Path, Waited]) -> None:
    history, waited = recorded
    out = run("history", "--history", str(history), "--since", "-1h", "--json")
    assert out.returncode == 0, out.stderr
    episodes = [e for e in orjson.loads(out.stdout)["episodes"] if e["waiters"]]
    assert len(episodes) == 1
    episode = episodes[0]
    assert set(episode) >= FIELDS
    assert episode["start"].endswith("Z") and episode["end"].endswith("Z")
    assert episode["blocker"]["pid"] == waited.holder_pid
    assert [w["pid"] for w in episode["waiters"]] == [waited.waiter_pid]
    assert episode["waiters"][0]["outcome"] == "acquired"
    assert set(episode["waiters"][0]) >= {"pid", "application", "start", "end", "outcome"}
    only_pg = run("history", "--history", str(history), "--source", "postgres", "--json")
    assert orjson.loads(only_pg.stdout) == {"episodes": []}


def test_history_table_and_show(recorded: tuple[Path, Waited]) -> None:
    history, waited = recorded
    table = run("history", "--history", str(history), "--since", "-1h")
    assert table.returncode == 0, table.stderr
    assert "ENDED BY" in table.stdout and "released" in table.stdout
    episode_id = orjson.loads(run("history", "--history", str(history), "--json").stdout)[
        "episodes"
    ][0]["id"]
    shown = run("history", "--history", str(history), "show", episode_id)
    assert shown.returncode == 0, shown.stderr
    assert f"pid {waited.waiter_pid}" in shown.stdout and "acquired" in shown.stdout
    missing = run("history", "--history", str(history), "show", "nosuchepisode")
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1


def test_bad_times_are_one_line(recorded: tuple[Path, Waited]) -> None:
    history, _ = recorded
    out = run("history", "--history", str(history), "--since", "yesterday-ish")
    assert out.returncode == 2
    assert "RFC 3339" in out.stderr and len(out.stderr.splitlines()) == 1


def test_ls_at_is_the_ls_document_with_as_of(recorded: tuple[Path, Waited]) -> None:
    history, waited = recorded
    at = waited.during.isoformat()
    out = run("ls", "--at", at, "--history", str(history), "--json")
    assert out.returncode == 0, out.stderr
    document = orjson.loads(out.stdout)
    assert document["schema"] == "lockwatch.ls/1" and document["as_of"]
    states = {lock["state"] for lock in document["locks"]}
    assert "waiting" in states
    table = run("ls", "--at", at, "--history", str(history))
    assert table.returncode == 0 and "waiting" in table.stdout


def test_why_at_answers_from_the_history(recorded: tuple[Path, Waited]) -> None:
    history, waited = recorded
    at = waited.during.isoformat()
    out = run("why", "--at", at, "--history", str(history), "lock wait timeout exceeded")
    assert out.returncode == 0, out.stderr
    assert f"pid {waited.holder_pid}" in out.stdout and "released" in out.stdout
    stamp = waited.during.strftime("%Y-%m-%d %H:%M:%S UTC")
    logged = run("why", "--history", str(history), f"{stamp} ERROR: lock wait timeout")
    # A timestamp in the text only: the history answers when it is a minute old.
    assert logged.returncode in (0, 1)
