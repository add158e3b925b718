"""`lockwatch demo` from the command line: the help teaches, mistakes are clear errors
(exit 2, no traceback) found before anything starts, and under a real terminal the demo
shows its locks, quits on `q` and leaves nothing behind."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.cli.test_watch_cli import NEEDS_TERMINAL, dashboard, isolated, terminal_env
from tests.conftest import run_cli
from tests.demo.conftest import wait_until

__all__ = ["isolated", "terminal_env"]  # fixtures, used by name

START_S = 30.0  # a cold start of seventeen children and Textual on a loaded machine
EXIT_S = 15.0


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp dir the demo would create its workspace in."""
    where = tmp_path / "temp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


def started_nothing(temp: Path) -> bool:
    return not list(temp.glob("lockwatch-demo-*"))


def test_help_says_what_it_starts_and_that_it_cleans_up(isolated: Path) -> None:
    code, out, _ = run_cli("demo", "--help")
    assert code == 0
    for text in ("Examples:", "lockwatch demo --keep", "--pg DSN", "--audit-log FILE",
                 "--theme", "SIGKILLed", "scope_conflict", "idle in transaction",
                 "lockwatch audit --audit-log", "removed unless --keep",
                 "pip install 'lockwatch[demo]'"):  # fmt: skip
        assert text in out, text
    commands = run_cli("--help")[1]
    assert re.search(r"^\s+demo\s", commands[commands.index("Commands:") :], re.MULTILINE)
    assert "lockwatch demo" in commands


def test_without_a_terminal_it_refuses_and_starts_nothing(isolated: Path, temp: Path) -> None:
    code, out, err = run_cli("demo")
    assert code == 2
    assert NEEDS_TERMINAL in err
    assert out == ""
    assert started_nothing(temp)


@pytest.mark.parametrize(
    ("dsn", "says"),
    [
        ("postgresql://me:se@cret@db.example/app", "more than one '@'"),
        ("host=db port", "not a DSN"),
        ("   ", "an empty DSN"),
        ("postgresql://nobody:hunter2@127.0.0.1:1/nothing", "cannot connect to nobody@127.0.0.1:1"),
    ],
)
def test_a_bad_dsn_is_a_clear_error_without_traceback(
    isolated: Path, temp: Path, dsn: str, says: str
) -> None:
    code, out, err = run_cli("demo", "--pg", dsn)
    assert code == 2
    assert "--pg" in err and says in err, err
    assert "Traceback" not in err + out
    assert "hunter2" not in err and "cret" not in err
    assert NEEDS_TERMINAL not in err  # what was typed is checked before the terminal
    assert started_nothing(temp)


def test_an_unknown_theme_is_refused(isolated: Path, temp: Path) -> None:
    code, _, err = run_cli("demo", "--theme", "nope")
    assert code == 2
    assert "no theme 'nope'" in err
    assert started_nothing(temp)


def demo_processes(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if marker in " ".join(process.info["cmdline"] or ()):
            found.append(process)
    return found


@pytest.mark.postgres
def test_under_a_terminal_it_runs_quits_on_q_and_leaves_nothing(
    pg_db: str, tmp_path: Path, terminal_env: dict[str, str]
) -> None:
    """On the test server (`--pg`): an embedded one is started by the Pilot test, and a
    third cold start of one would cost the suite seconds for nothing new."""
    with dashboard(["demo", "--pg", pg_db], tmp_path, terminal_env) as term:
        term.read_until(lambda text: "scope_conflict" in text, "the demo's locks", START_S)
        found = re.search(r"taking locks in (\S+);", term.text())
        assert found, term.tail()
        workspace = Path(found.group(1))
        assert workspace.is_dir()
        # Sixteen children, less the one killed on purpose and the one-shot cancelled run.
        wait_until(lambda: len(demo_processes(str(workspace))) == 15, "the children")
        term.send(b"q")
        assert term.wait_exit(EXIT_S) == 0
        text = term.text()
    assert "lockwatch demo: stopped 17 processes, ended 12 PostgreSQL sessions" in text
    assert "dropped table lockwatch_demo_" in text
    assert not workspace.exists()
    wait_until(lambda: not demo_processes(str(workspace)), "no demo process left", timeout=5)
