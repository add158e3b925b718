"""`lockwatch ls`: the table, the JSON contract, exit codes, and bad input."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import run_cli

LOCK_KEYS = {
    "id",
    "source",
    "format",
    "name",
    "path",
    "state",
    "reasons",
    "holder",
    "acquired_at",
    "heartbeat_at",
    "ttl_seconds",
    "age_seconds",
    "scope",
    "conflicts_with",
}
HOLDER_KEYS = {"pid", "host", "actor", "session", "operation", "alive"}


def stamp(seconds_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z")


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """One lock per state: an active clawdbot lock held by this test process,
    a stale gitclaw lock, an invalid tower-fleet lock."""
    write(
        tmp_path / "memory" / ".lock",
        {
            "pid": os.getpid(),
            "session_id": "main",
            "acquired_at": stamp(0),
            "hostname": socket.gethostname(),
            "operation": "write:tasks.json",
        },
    )
    write(
        tmp_path / ".GITCLAW" / "state" / "locks" / "12.lock",
        {"issueNumber": 12, "runId": "987", "acquiredAt": stamp(3600), "pid": os.getpid()},
    )
    write(tmp_path / "logs" / "locks" / "app.lock", {"lock_version": "v2"})
    return tmp_path


run = run_cli


def test_json_contract(workspace: Path) -> None:
    code, out, _ = run("ls", "--json", str(workspace))
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "lockwatch.ls/1"
    assert doc["host"] == socket.gethostname()
    assert doc["generated_at"].endswith("Z")
    datetime.fromisoformat(doc["generated_at"])
    assert doc["errors"] == []
    by_format = {lock["format"]: lock for lock in doc["locks"]}
    assert set(by_format) == {"clawdbot", "gitclaw", "tower-fleet/v1"}
    for lock in doc["locks"]:
        assert set(lock) >= LOCK_KEYS
        assert set(lock["holder"]) >= HOLDER_KEYS
        assert lock["source"] == "file"
        assert lock["id"] == "file:" + lock["path"]
        assert os.path.isabs(lock["path"])
        assert all(set(r) == {"code", "message"} and r["message"] for r in lock["reasons"])

    active = by_format["clawdbot"]
    assert active["state"] == "active"
    assert active["holder"]["pid"] == os.getpid()
    assert active["holder"]["alive"] is True
    assert active["holder"]["session"] == "main"
    assert active["holder"]["operation"] == "write:tasks.json"
    assert 0 <= active["age_seconds"] < 30

    stale = by_format["gitclaw"]
    assert stale["state"] == "stale"
    assert [r["code"] for r in stale["reasons"]] == ["too_old"]
    assert stale["name"] == "issue-12"
    assert stale["ttl_seconds"] == 600
    assert stale["age_seconds"] >= 3600

    invalid = by_format["tower-fleet/v1"]
    assert invalid["state"] == "invalid"
    assert "schema_violation" in [r["code"] for r in invalid["reasons"]]


def test_table_lists_every_lock_with_state_words(workspace: Path) -> None:
    code, out, _ = run("ls", str(workspace))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["STATE", "FORMAT", "NAME", "HOLDER", "AGE", "REASONS", "WHERE"]
    rows = {line.split()[1]: line.split()[0] for line in lines[1:-1]}
    assert rows == {"clawdbot": "active", "gitclaw": "stale", "tower-fleet/v1": "invalid"}
    assert lines[-1] == "3 locks: 1 active, 1 stale, 1 invalid"
    assert "\x1b[" not in out  # not a terminal: no colour codes


def test_long_table_spells_out_reasons(workspace: Path) -> None:
    _, out, _ = run("ls", "-l", str(workspace))
    assert "    too_old: held for" in out


def test_default_path_is_the_current_directory(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace)
    _, out, _ = run("ls", "--json")
    assert len(json.loads(out)["locks"]) == 3
    _, table, _ = run("ls")
    assert "memory/.lock" in table  # paths under the cwd are shown relative


def test_fail_on_stale_exits_3(workspace: Path) -> None:
    assert run("ls", "--fail-on-stale", str(workspace))[0] == 3
    assert run("ls", "--json", "--fail-on-stale", str(workspace))[0] == 3


def test_fail_on_stale_exits_0_without_stale_locks(workspace: Path) -> None:
    assert run("ls", "--fail-on-stale", str(workspace / "memory"))[0] == 0
    # invalid is not stale
    assert run("ls", "--fail-on-stale", str(workspace / "logs"))[0] == 0


def test_missing_path_is_exit_2_with_a_clear_message(tmp_path: Path) -> None:
    code, out, err = run("ls", "--json", str(tmp_path / "nowhere"))
    assert code == 2
    assert json.loads(out)["errors"][0]["code"] == "not_found"
    assert "nowhere" in err and "Traceback" not in err


def test_missing_path_in_the_table_is_said_once(tmp_path: Path) -> None:
    code, out, err = run("ls", str(tmp_path / "nowhere"))
    assert code == 2
    assert out == ""  # not also "No locks under .../nowhere"
    assert err.strip() == f"lockwatch: {tmp_path / 'nowhere'}: No such file or directory"


def test_empty_directory_says_what_was_looked_for(tmp_path: Path) -> None:
    code, out, _ = run("ls", str(tmp_path))
    assert code == 0
    assert out.strip() == (
        f"No locks under {tmp_path} (looked for *.lock, *.pid, lock directories and files"
        " tools name their own way, and files the kernel holds a lock on)."
    )


@pytest.mark.parametrize(("typo", "meant"), [("lss", "ls"), ("brake", "break"), ("auidt", "audit")])
def test_a_mistyped_command_is_a_usage_error_not_a_dashboard(
    typo: str, meant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(typo)
    assert code == 2
    assert f"No such command '{typo}'. Did you mean '{meant}'?" in err
    assert "Traceback" not in err


def test_a_directory_named_like_a_command_still_opens_as_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from lockwatch.cli import cli

    (tmp_path / "lss").mkdir()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["lss", "--help"])
    assert result.exit_code == 0, result.output
    assert "watch [OPTIONS] [PATH]" in result.output  # the dashboard, on ./lss


def test_group_help_names_the_global_options_and_the_dashboards() -> None:
    code, out, _ = run("--help")
    assert code == 0
    assert "--readonly" in out
    assert "lockwatch watch --help" in out


@pytest.mark.parametrize(
    ("dsn", "said"),
    [
        ("garbage dsn", "not a connection string libpq can read"),
        ("postgresql://x@localhost:abc/db", "the port 'abc' is not a number"),
        ("postgresql://u:hunter2@h:xx/db", "the port 'xx' is not a number"),
    ],
)
@pytest.mark.parametrize("command", [("ls",), ("ls", "--json")])
def test_a_malformed_dsn_is_a_usage_error(dsn: str, said: str, command: tuple[str, ...]) -> None:
    code, out, err = run(*command, "--pg", dsn)
    assert code == 2
    assert said in err
    assert "hunter2" not in err + out  # scrubbed, as every DSN lockwatch prints
    assert "Traceback" not in err


def test_unknown_option_is_a_usage_error() -> None:
    code, _, err = run("ls", "--jsn")
    assert code == 2
    assert "No such option" in err


@pytest.mark.parametrize("args", [["--help"], ["ls", "--help"]])
def test_help_teaches(args: list[str]) -> None:
    code, out, _ = run(*args)
    assert code == 0
    assert ("--json" if args[0] == "ls" else "  ls  ") in out
    assert "Examples:\n" in out
    assert "\\b" not in out  # click's no-rewrap marker must be the real \b character


def test_version() -> None:
    from lockwatch import __version__

    code, out, _ = run("--version")
    assert code == 0
    assert __version__ in out


def test_ls_does_not_import_textual(workspace: Path) -> None:
    script = (
        "import sys\n"
        "from lockwatch.cli import cli\n"
        "try:\n"
        f"    cli(['ls', '--json', {str(workspace)!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "banned = [m for m in ('textual', 'psycopg', 'inotify_simple') if m in sys.modules]\n"
        "sys.stderr.write(repr(banned))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stderr.strip() == "[]"
    assert json.loads(done.stdout)["schema"] == "lockwatch.ls/1"


def test_console_script_runs_as_a_module(workspace: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--fail-on-stale", str(workspace)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 3
    assert "stale" in done.stdout
