"""Files and directories another account makes first where root writes (issue 47,
items 6, 7 and 18).

In a sticky directory (/run/lock, /tmp) anyone may make a name before root does.
A tombstone directory, a file beside the audit log (its head, the head's spare) or
a `--record` file that another account made is theirs: root writing into it hands
them what it writes, lets them remove it (verify then says TAMPERED), or, for a
FIFO, blocks root for ever. Each is refused now, with one line and nothing done.

The other account is a real one, made for the test (tests/adversarial/accounts.py),
and acts as itself (mkdir, mkfifo, a 0666 file) in a sticky 1777 directory that
stands in for /run/lock and /tmp. The FIFO cases run lockwatch in a subprocess
with a timeout: before the fix it hung in open().
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockwatch.actions.audit import read_records
from lockwatch.sources.recording import Recorder, RecordingError
from tests.adversarial.accounts import account, as_user, needs_root, shared_dir
from tests.conftest import run_cli

pytestmark = needs_root
TIMEOUT_S = 60.0  # only keeps a run that hangs (the bug) from hanging the suite


@pytest.fixture(autouse=True)
def own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("PG", "LOCKWATCH_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def untrusted() -> Iterator[pwd.struct_passwd]:
    with account() as user:
        yield user


@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_dir() as path:
        yield path


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "audit.key"
    path.parent.mkdir(mode=0o700)
    path.write_text("k" * 64 + "\n")
    path.chmod(0o600)
    return path


def stale_lock(directory: Path) -> Path:
    lock = directory / "svc.pid"
    lock.write_text("999999\n")  # no such process: stale
    return lock


def break_args(lock: Path, log: Path, key: Path) -> list[str]:
    return [
        "break", str(lock), "--reason", "holder died", "--yes",
        "--audit-log", str(log), "--audit-key", str(key),
    ]  # fmt: skip


def events(log: Path) -> list[tuple[str, str | None]]:
    if not log.exists():
        return []
    return [(r["event"], r.get("code")) for _, r, _ in read_records(log) if r]


def lockwatch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCKWATCH_", "PG"))}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


# -- item 6: the tombstone directory ------------------------------------------------


@pytest.mark.parametrize("mode", ["777", "700"])
def test_a_tombstone_directory_another_account_made_is_refused(
    tmp_path: Path, shared: Path, key: Path, untrusted: pwd.struct_passwd, mode: str
) -> None:
    """`mkdir -m 777 /run/lock/.lockwatch-broken` by the account, then root's
    break: the lock went into their directory (the docs promise 0700, root's).
    Private but theirs (700) is theirs all the same."""
    lock = stale_lock(shared)
    tombs = shared / ".lockwatch-broken"
    as_user(untrusted, ["mkdir", "-m", mode, str(tombs)])
    log = tmp_path / "log" / "audit.jsonl"
    code, out, err = run_cli(*break_args(lock, log, key))
    assert code == 1, out + err
    assert lock.read_text() == "999999\n"
    assert list(tombs.iterdir()) == []
    said = (out + err).strip()
    assert len(said.splitlines()) == 1, said
    assert f"the tombstone directory {tombs}" in said
    assert f"owned by {untrusted.pw_name}" in said and "nothing done" in said
    assert events(log) == [("action_intent", None), ("action_refused", "tombstone_unsafe")]


def test_a_tombstone_directory_on_a_path_others_can_swap_is_refused(
    tmp_path: Path, shared: Path, key: Path, untrusted: pwd.struct_passwd
) -> None:
    """--tombstone-dir trash/lw, where the account made `trash` (0777, no sticky
    bit): they could rename root's `lw` away and put their own in its place."""
    lock = stale_lock(shared)
    as_user(untrusted, ["mkdir", "-m", "777", str(shared / "trash")])
    log = tmp_path / "log" / "audit.jsonl"
    code, out, err = run_cli(*break_args(lock, log, key), "--tombstone-dir", "trash/lw")
    assert code == 1, out + err
    assert lock.exists() and not (shared / "trash" / "lw").exists()
    assert f"{shared / 'trash'} is owned by {untrusted.pw_name}" in out + err


def test_roots_own_tombstone_directory_in_a_sticky_directory_is_used(
    tmp_path: Path, shared: Path, key: Path
) -> None:
    lock = stale_lock(shared)
    log = tmp_path / "log" / "audit.jsonl"
    code, out, err = run_cli(*break_args(lock, log, key))
    assert code == 0, out + err
    tombs = shared / ".lockwatch-broken"
    st = tombs.stat()
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700
    assert len(list(tombs.iterdir())) == 1 and not lock.exists()


# -- item 7: files beside the audit log ---------------------------------------------


def plant(user: pwd.struct_passwd, path: Path, kind: str) -> None:
    if kind == "fifo":
        as_user(user, ["mkfifo", "-m", "666", str(path)])
    else:
        as_user(user, ["sh", "-c", f"umask 0; : > '{path}'"])


@pytest.mark.parametrize("kind", ["file", "fifo"])
@pytest.mark.parametrize("beside", [".root-audit.jsonl.head.spare", "root-audit.jsonl.head"])
def test_a_file_planted_beside_the_audit_log_is_refused(
    tmp_path: Path, shared: Path, key: Path, untrusted: pwd.struct_passwd, beside: str, kind: str
) -> None:
    """The account makes `/tmp/.root-audit.jsonl.head.spare` (0666) before root's
    first break with `--audit-log /tmp/root-audit.jsonl`: the head became theirs
    (`-rw-rw-rw- untrusted`), to delete; a FIFO there blocked the break for ever."""
    locks = tmp_path / "locks"
    locks.mkdir()
    lock = stale_lock(locks)
    log = shared / "root-audit.jsonl"
    planted = shared / beside
    plant(untrusted, planted, kind)
    done = lockwatch(tmp_path, *break_args(lock, log, key))
    assert done.returncode == 1, done.stdout + done.stderr
    said = (done.stdout + done.stderr).strip()
    assert len(said.splitlines()) == 1, said
    assert f"the audit log {log} is refused: {planted} beside it is" in said
    assert "nothing was done" in said and "Traceback" not in said
    assert lock.read_text() == "999999\n"
    assert not log.exists()
    # Nothing of root's went into their file, and nothing else of theirs is root's.
    assert planted.lstat().st_uid == untrusted.pw_uid
    if kind == "file":
        assert planted.read_bytes() == b""
    assert {p.name for p in shared.iterdir()} == {beside}


def test_the_audit_log_in_a_sticky_directory_is_roots_alone(
    tmp_path: Path, shared: Path, key: Path
) -> None:
    """Nothing planted: the log, its head and the spare are root's, 0600."""
    lock = stale_lock(tmp_path)
    log = shared / "root-audit.jsonl"
    code, out, err = run_cli(*break_args(lock, log, key))
    assert code == 0, out + err
    for path in shared.iterdir():
        st = path.lstat()
        assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, path
        assert stat.S_IMODE(st.st_mode) == 0o600, path
    code, out, err = run_cli("audit", "verify", "--audit-log", str(log), "--audit-key", str(key))
    assert code == 0, out + err


def test_a_fifo_as_the_audit_log_itself_is_refused(
    tmp_path: Path, shared: Path, key: Path, untrusted: pwd.struct_passwd
) -> None:
    lock = stale_lock(tmp_path)
    log = shared / "root-audit.jsonl"
    plant(untrusted, log, "fifo")
    done = lockwatch(tmp_path, *break_args(lock, log, key))
    assert done.returncode == 1
    assert f"owned by {untrusted.pw_name}" in done.stderr + done.stdout
    assert lock.exists()


# -- item 18: --record --------------------------------------------------------------


def test_record_into_another_accounts_file_is_refused(
    shared: Path, untrusted: pwd.struct_passwd
) -> None:
    """Their 0666 file: root's every snapshot would be appended where they read it."""
    path = shared / "incident.jsonl"
    plant(untrusted, path, "file")
    with pytest.raises(RecordingError) as refused:
        Recorder(path, host="h")
    assert str(refused.value) == (
        f"{path}: refused: owned by {untrusted.pw_name}, not by you (root): someone else made"
        " it (look at it, then remove it)"
    )
    assert path.read_bytes() == b""


def test_record_into_a_file_others_can_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "incident.jsonl"
    path.write_bytes(b"")
    path.chmod(0o666)
    with pytest.raises(RecordingError, match=r"refused: every user can write it \(mode 0666\)"):
        Recorder(path, host="h")


def test_record_through_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    link = tmp_path / "incident.jsonl"
    link.symlink_to(target)
    with pytest.raises(RecordingError, match="a symlink"):
        Recorder(link, host="h")
    assert target.read_bytes() == b""


def test_a_new_recording_is_made_0600_and_ours(tmp_path: Path) -> None:
    path = tmp_path / "incident.jsonl"
    Recorder(path, host="h").close()
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    Recorder(path, host="h").close()  # our own file again: appended to
    assert path.read_bytes().count(b"recording/1") == 2


def test_record_into_a_fifo_does_not_hang_the_dashboard(
    tmp_path: Path, shared: Path, untrusted: pwd.struct_passwd
) -> None:
    """Their FIFO at the recording's name: the dashboard waited for a reader for
    ever. Now one line, exit 2, before the dashboard starts."""
    path = shared / "incident.jsonl"
    plant(untrusted, path, "fifo")
    script = (
        "import sys\n"
        "import lockwatch.cli.watch\n"
        "sys.modules['lockwatch.cli.watch']._need_terminal = lambda: None\n"
        "sys.argv = ['lockwatch', 'watch', '--record', sys.argv[1], sys.argv[2]]\n"
        "from lockwatch.cli import main\n"
        "main()\n"
    )
    locks = tmp_path / "locks"
    locks.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), str(locks)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"lockwatch: --record: {path}: refused: a FIFO (named pipe), not a regular file\n"
    )
