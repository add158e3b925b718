"""`lockwatch [PATH]`, `lockwatch watch` and `lockwatch replay` from the command line.

In-process through click's CliRunner, where stdin and stdout are no terminals: usage
errors, routing and help. Then the real thing under a pseudo-terminal: the dashboard
starts, shows a lock, and quits on `q`; a `--record`ed session replays the same way.
Every wait on the child is a bounded read loop.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from tests.conftest import run_cli

NEEDS_TERMINAL = "the dashboard needs a terminal"
COLUMNS, LINES = 100, 30
START_S = 20.0  # a cold Textual start on a slow CI machine is well within this
EXIT_S = 10.0


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No lockwatch.toml, user config, server variables or themes from this machine."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for name in list(os.environ):
        if name.startswith(("PG", "LOCKWATCH_")):
            monkeypatch.delenv(name)
    return home


def lock_dir(root: Path, *names: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / f"{name}.lock").write_text(json.dumps({"pid": os.getpid(), "operation": name}))
    return root


# --------------------------------------------------------------------------- no terminal


def test_no_args_needs_a_terminal_and_names_ls(isolated: Path) -> None:
    code, out, err = run_cli()
    assert code == 2
    assert NEEDS_TERMINAL in err
    assert "lockwatch ls" in err
    assert out == ""


def test_a_path_routes_to_watch(isolated: Path, tmp_path: Path) -> None:
    root = lock_dir(tmp_path / "locks", "a")
    code, _, err = run_cli(str(root))
    assert code == 2
    assert NEEDS_TERMINAL in err
    assert "No such command" not in err
    # A path that does not exist is still a path, not a subcommand: said as `ls` says it.
    code, _, err = run_cli(str(tmp_path / "not-yet"), "--sort", "age")
    assert code == 2
    assert "No such file or directory" in err and "No such command" not in err


def test_a_path_that_does_not_exist_is_refused_as_ls_refuses_it(
    isolated: Path, tmp_path: Path
) -> None:
    """Issue 46, item 9: one rule for the dashboard and `ls`: a PATH named that
    does not exist is an error, exit 2, with the same line, before anything starts."""
    missing = str(tmp_path / "nonexistent" / "dir")
    for command in ((missing,), ("watch", missing), ("ls", missing)):
        code, out, err = run_cli(*command)
        assert code == 2, (command, out, err)
        assert f"lockwatch: {missing}: No such file or directory" in err, (command, err)
        assert NEEDS_TERMINAL not in err


def test_watch_needs_a_terminal(isolated: Path, tmp_path: Path) -> None:
    code, _, err = run_cli("watch", str(lock_dir(tmp_path / "locks", "a")))
    assert code == 2
    assert NEEDS_TERMINAL in err and "lockwatch ls" in err


def test_unknown_theme_names_the_available_ones(isolated: Path) -> None:
    code, _, err = run_cli("watch", "--theme", "nope")
    assert code == 2
    assert "--theme" in err and "no theme 'nope'" in err
    for theme in ("incident", "lockwatch-dark", "lockwatch-light"):
        assert theme in err
    assert NEEDS_TERMINAL not in err  # options are checked before the terminal


def test_the_first_scan_starts_before_the_ui_toolkit_loads(isolated: Path, tmp_path: Path) -> None:
    """The feeds start (a file feed forks its first scan) before Textual is
    imported, so that loading the dashboard overlaps the scan."""
    script = (
        "import sys\n"
        "import lockwatch.cli.watch\n"
        "watch = sys.modules['lockwatch.cli.watch']  # the package names the command so\n"
        "def start(targets, host):\n"
        "    print('textual' in sys.modules, flush=True)\n"
        "    raise SystemExit(0)\n"
        "watch.start_feeds = start\n"
        "watch._need_terminal = lambda: None\n"
        "sys.argv = ['lockwatch', 'watch', sys.argv[1]]\n"
        "from lockwatch.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(lock_dir(tmp_path / "locks", "a"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "False", done.stderr


def test_a_recording_that_cannot_start_stops_the_first_scan(isolated: Path, tmp_path: Path) -> None:
    """`--record` into a directory that is not there fails after the feeds
    started: their forked workers are stopped and reaped, not left behind."""
    script = (
        "import sys, psutil\n"
        "import lockwatch.cli.watch\n"
        "watch = sys.modules['lockwatch.cli.watch']\n"
        "watch._need_terminal = lambda: None\n"
        "sys.argv = ['lockwatch', 'watch', '--record', sys.argv[1], sys.argv[2]]\n"
        "from lockwatch.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    print(exc.code, len(psutil.Process().children()), flush=True)\n"
    )
    locks = tmp_path / "locks"
    for n in range(40):  # enough directories for the scan to fork its workers
        lock_dir(locks / f"d{n}", "a")
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "nowhere" / "r.jsonl"), str(locks)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--record" in done.stderr
    assert done.stdout.split() == ["2", "0"], done.stderr


def test_bad_filter_shows_the_query_error(isolated: Path) -> None:
    code, _, err = run_cli("watch", "--filter", "state:zombie")
    assert code == 2
    assert "--filter" in err
    assert "unknown state 'zombie'" in err
    assert NEEDS_TERMINAL not in err


@pytest.mark.parametrize("value", ["0", "0.05", "-1", "inf", "3601", "soon", "nan"])
def test_refresh_must_be_a_sensible_number_of_seconds(isolated: Path, value: str) -> None:
    code, _, err = run_cli("watch", "--refresh", value)
    assert code == 2
    assert "--refresh" in err
    assert NEEDS_TERMINAL not in err


@pytest.mark.parametrize("value", ["0", "-2", "inf", "nan"])
def test_replay_speed_must_be_a_sensible_number(isolated: Path, tmp_path: Path, value: str) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_bytes(orjson.dumps({"lockwatch": "recording/1", "host": "h"}) + b"\n")
    code, _, err = run_cli("replay", str(path), "--speed", value)
    assert code == 2
    assert "--speed" in err


def test_replay_of_a_missing_file(isolated: Path, tmp_path: Path) -> None:
    code, _, err = run_cli("replay", str(tmp_path / "missing.jsonl"))
    assert code == 2
    assert "missing.jsonl" in err and "cannot read" in err


def test_replay_of_something_else(isolated: Path, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"hello": "world"}\n')
    code, _, err = run_cli("replay", str(path))
    assert code == 2
    assert "not a lockwatch recording" in err


def test_replay_of_a_recording_needs_a_terminal(isolated: Path, tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_bytes(orjson.dumps({"lockwatch": "recording/1", "host": "h"}) + b"\n")
    code, _, err = run_cli("replay", str(path), "--theme", "incident")
    assert code == 2
    assert NEEDS_TERMINAL in err


def test_ls_still_routes_to_ls(isolated: Path, tmp_path: Path) -> None:
    root = lock_dir(tmp_path / "locks", "listed-by-ls")
    code, out, _ = run_cli("ls", str(root), "--json")
    assert code == 0
    assert [lock["name"] for lock in json.loads(out)["locks"]] == ["listed-by-ls"]
    code, out, _ = run_cli("ls", str(root))
    assert code == 0
    assert "listed-by-ls" in out


def test_group_help_lists_the_commands(isolated: Path) -> None:
    code, out, _ = run_cli("--help")
    assert code == 0
    assert out.startswith("Usage:")
    commands = out[out.index("Commands:") :]
    for command in ("ls", "watch", "replay"):
        assert re.search(rf"^\s+{command}\s", commands, re.MULTILINE), command
    assert run_cli("-h")[1] == out


def test_version(isolated: Path) -> None:
    from lockwatch import __version__

    code, out, _ = run_cli("--version")
    assert code == 0
    assert out.strip() == f"lockwatch, version {__version__}"


def test_watch_help_documents_the_keys(isolated: Path) -> None:
    code, out, _ = run_cli("watch", "--help")
    assert code == 0
    assert "Keys:" in out
    for key in ("/ filter", "s sort", "enter details", "p pause", "t theme", "? help", "q quit"):
        assert key in out, key
    for option in ("--theme", "--filter", "--refresh", "--record", "--pg"):
        assert option in out, option


def test_replay_help_documents_its_keys(isolated: Path) -> None:
    code, out, _ = run_cli("replay", "--help")
    assert code == 0
    for key in ("n step", "+ faster", "- slower", "--speed", "--paused"):
        assert key in out, key


# --------------------------------------------------------------------------- a real terminal


_ESCAPES = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    rb"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    rb"|\x1b[P^_][^\x1b]*\x1b\\"  # DCS, PM, APC
    rb"|\x1b[()][0-9A-Za-z]|\x1b[@-Z\\-_=>78]"
)


def lockwatch_command() -> list[str]:
    script = Path(sys.executable).parent / "lockwatch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "lockwatch"]


class Terminal:
    """A child process on a pseudo-terminal of COLUMNS x LINES."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        try:
            self.proc = subprocess.Popen(
                args,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self.fd = master
        self.raw = bytearray()

    def text(self) -> str:
        return _ESCAPES.sub(b"", bytes(self.raw)).decode("utf-8", "replace")

    def _read(self, wait: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if ready:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed its end
                chunk = b""
            self.raw += chunk

    def read_until(self, predicate: Callable[[str], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.text()):
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:g}s waiting for {what}; saw {self.tail()}")
            if self.proc.poll() is not None:
                self._read(0)
                if not predicate(self.text()):
                    pytest.fail(
                        f"lockwatch exited {self.proc.returncode} before {what}: {self.tail()}"
                    )
                return
            self._read(0.05)

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait_exit(self, timeout: float) -> int:
        """The exit status, reading on meanwhile (a full pty would block the child)."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"lockwatch still running {timeout:g}s after q: {self.tail()}")
            self._read(0.05)
        return self.proc.returncode

    def tail(self) -> str:
        return repr(self.text()[-1500:])

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=EXIT_S)
        os.close(self.fd)


@pytest.fixture
def terminal_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PG", "LOCKWATCH_", "TEXTUAL", "PYTEST", "COV_"))
    }
    env.update(
        TERM="xterm-256color",
        COLUMNS=str(COLUMNS),
        LINES=str(LINES),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        LANG="C.UTF-8",
    )
    return env


@contextlib.contextmanager
def dashboard(args: list[str], cwd: Path, env: dict[str, str]) -> Iterator[Terminal]:
    term = Terminal([*lockwatch_command(), *args], cwd, env)
    try:
        yield term
    finally:
        term.close()


def test_dashboard_shows_a_lock_and_quits_on_q(
    tmp_path: Path, terminal_env: dict[str, str]
) -> None:
    root = lock_dir(tmp_path / "locks", "pty-smoke")
    with dashboard([str(root)], tmp_path, terminal_env) as term:
        term.read_until(lambda text: "pty-smoke" in text, "the lock on screen", START_S)
        term.send(b"q")
        assert term.wait_exit(EXIT_S) == 0


def test_recorded_session_replays(tmp_path: Path, terminal_env: dict[str, str]) -> None:
    root = lock_dir(tmp_path / "locks", "rec-first")
    recording = tmp_path / "incident.jsonl"
    with dashboard([str(root), "--record", str(recording)], tmp_path, terminal_env) as term:
        term.read_until(lambda text: "rec-first" in text, "the first lock", START_S)
        lock_dir(root, "rec-later")
        term.read_until(lambda text: "rec-later" in text, "the new lock", START_S)
        term.send(b"q")
        assert term.wait_exit(EXIT_S) == 0

    lines = recording.read_bytes().splitlines()
    assert orjson.loads(lines[0])["lockwatch"] == "recording/1"
    assert len(lines) >= 3  # the header, the initial scan, the new lock
    assert b"rec-later" in b"".join(lines[2:])
    assert oct(recording.stat().st_mode & 0o777) == oct(0o600)

    with dashboard(["replay", str(recording), "--speed", "8"], tmp_path, terminal_env) as term:
        term.read_until(
            lambda text: "rec-first" in text and "rec-later" in text,
            "both recorded locks",
            START_S,
        )
        term.send(b"q")
        assert term.wait_exit(EXIT_S) == 0
