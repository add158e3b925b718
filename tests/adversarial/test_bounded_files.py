"""Files lockwatch reads are regular files, read bounded (issue 36, items 5 and 6).

`lockwatch replay /dev/zero` grew to 6.4 GB in 3 s; a FIFO hung it; `--token-file
/dev/zero` grew 180 MB/s before its size check, and a FIFO hung the start. Now a
FIFO, a device or a directory is refused by name before it is read, without
blocking, and a regular file is read at most to its limit (plus one byte).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from lockwatch.sources.recording import MAX_HEADER_BYTES, RecordingError, read_lines
from lockwatch.trusted import KIB, SETTINGS, Refused, read_file

TIMEOUT_S = 60.0  # only keeps a broken (hanging) run from hanging the suite
# Far below what the unbounded reads reached (gigabytes), far above an idle
# lockwatch (~40 MB).
RSS_LIMIT_KB = 200 * 1024


def run(
    cwd: Path, *args: str, stdin: str | None = None
) -> tuple[subprocess.CompletedProcess[str], int]:
    """`lockwatch ARGS` as a process of its own (its standard input the file
    `stdin`, if given): what it did, and its peak RSS in KB."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCKWATCH_", "PG"))}
    env["XDG_CONFIG_HOME"] = str(cwd / "xdg-config")
    env["XDG_STATE_HOME"] = str(cwd / "xdg-state")
    script = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(done.stdout); sys.stderr.write(done.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(done.returncode)\n"
    )
    with open(stdin or os.devnull, "rb") as given:
        done = _run_measured(cwd, env, script, args, given)
    *lines, rss = done.stderr.strip().splitlines()
    done.stderr = "\n".join(lines)
    return done, int(rss)


def _run_measured(
    cwd: Path, env: dict[str, str], script: str, args: tuple[str, ...], stdin: IO[bytes]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, sys.executable, "-m", "lockwatch", *args],
        stdin=stdin,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


# -- replay -------------------------------------------------------------------------


def test_replay_of_dev_zero_is_refused_fast_with_flat_rss(tmp_path: Path) -> None:
    started = time.monotonic()
    done, rss = run(tmp_path, "replay", "/dev/zero")
    assert done.returncode == 2
    assert "/dev/zero: not read: a character device, not a regular file" in done.stderr
    assert rss < RSS_LIMIT_KB, rss
    assert time.monotonic() - started < TIMEOUT_S


def test_replay_of_a_fifo_is_refused_not_hung(tmp_path: Path, fifo: Path) -> None:
    done, _ = run(tmp_path, "replay", str(fifo))
    assert done.returncode == 2
    assert "not read: a FIFO (named pipe), not a regular file" in done.stderr


def test_a_recording_whose_first_line_is_no_header_is_refused_at_once(tmp_path: Path) -> None:
    """A huge file with no newline: refused after its first 64 KiB, not read whole."""
    path = tmp_path / "big.bin"
    with path.open("wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: 64 MiB of zero bytes, one "line"
    with pytest.raises(RecordingError, match="not a lockwatch recording"):
        read_lines(path)
    assert MAX_HEADER_BYTES == 64 * KIB


def test_a_change_set_line_over_its_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockwatch.sources import recording

    monkeypatch.setattr(recording, "MAX_LINE_BYTES", 1024)
    path = tmp_path / "rec.jsonl"
    path.write_bytes(b'{"lockwatch": "recording/1"}\n' + b"x" * 5000 + b"\n")
    with pytest.raises(RecordingError, match="line 2 is over"):
        read_lines(path)


# -- token, password and config files ------------------------------------------------


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "dir"])
def test_remote_token_file_that_is_no_file_is_refused_fast(
    tmp_path: Path, fifo: Path, special: str
) -> None:
    path = {"/dev/zero": "/dev/zero", "fifo": str(fifo), "dir": str(tmp_path)}[special]
    done, rss = run(tmp_path, "ls", "--remote", "http://127.0.0.1:9", "--remote-token-file", path)
    assert done.returncode == 2, done.stderr
    assert f"token file {path}:" in done.stderr and "not a regular file" in done.stderr
    assert rss < RSS_LIMIT_KB, rss


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_serve_token_file_that_is_no_file_is_refused_fast(
    tmp_path: Path, fifo: Path, special: str
) -> None:
    path = "/dev/zero" if special == "/dev/zero" else str(fifo)
    done, rss = run(tmp_path, "serve", "--listen", "127.0.0.1:0", "--token-file", path)
    assert done.returncode != 0
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert rss < RSS_LIMIT_KB, rss


def test_redis_password_file_that_is_a_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "lockwatch.toml").write_text(
        '[redis]\nurl = "redis://127.0.0.1:9/0"\npassword_file = "/dev/zero"\n'
    )
    done, rss = run(tmp_path, "ls")
    assert done.returncode == 2, done.stderr
    assert "redis.password_file /dev/zero" in done.stderr
    assert "a character device, not a regular file" in done.stderr
    assert rss < RSS_LIMIT_KB, rss


def test_a_config_that_is_a_fifo_is_refused_not_hung(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "lockwatch.toml")
    done, _ = run(tmp_path, "ls")
    assert done.returncode == 2
    assert "lockwatch.toml: not loaded: a FIFO (named pipe), not a regular file" in done.stderr


# -- the reader itself ---------------------------------------------------------------


def test_read_file_reads_up_to_its_limit_and_refuses_a_byte_more(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_file(path, 100, None) == b"x" * 100
    with pytest.raises(Refused, match="100 bytes, more than the 99 bytes allowed"):
        read_file(path, 99, None)


def test_read_file_names_what_it_refuses(tmp_path: Path, fifo: Path) -> None:
    for path, kind in (
        (fifo, "a FIFO"),
        (tmp_path, "a directory"),
        ("/dev/null", "a character device"),
    ):
        with pytest.raises(Refused, match=f"{kind}.*not a regular file"):
            read_file(path, 10, None)


def test_a_file_growing_past_its_limit_while_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fstat said small, the read finds more (it grew in between): at most
    limit + 1 bytes are read, and it is refused."""
    path = tmp_path / "f"
    path.write_bytes(b"y" * 10_000_000)
    real = os.fstat

    def smaller(fd: int) -> os.stat_result:
        st = list(real(fd))
        st[stat.ST_SIZE] = 5
        return os.stat_result(st)

    reads: list[int] = []
    real_read = os.read

    def counted(fd: int, size: int) -> bytes:
        reads.append(size)
        return real_read(fd, size)

    monkeypatch.setattr("lockwatch.trusted.os.fstat", smaller)
    monkeypatch.setattr("lockwatch.trusted.os.read", counted)
    with pytest.raises(Refused, match="more than the 10 bytes allowed"):
        read_file(path, 10, None)
    assert sum(reads) <= 11


def test_settings_trust_refuses_a_file_others_can_write(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    path.chmod(0o606)
    assert stat.S_IMODE(path.stat().st_mode) == 0o606
    with pytest.raises(Refused, match=r"every user can write it \(mode 0606\)") as refused:
        read_file(path, 10, SETTINGS)
    assert refused.value.untrusted


# -- the audit log's own files -------------------------------------------------------


def test_audit_verify_anchors_that_are_no_file_are_refused_fast(tmp_path: Path, fifo: Path) -> None:
    log = tmp_path / "audit.jsonl"
    from lockwatch.actions.audit import AuditLog, Operator
    from lockwatch.clock import SystemClock

    key = tmp_path / "keys" / "audit.key"
    AuditLog(
        log, clock=SystemClock(), host="h", operator=Operator("a", "a", None), key_path=key
    ).append("lock_broken", {"reason": "r"})
    for anchors in ("/dev/zero", str(fifo)):
        done, rss = run(
            tmp_path, "audit", "verify", "--audit-log", str(log), "--audit-key", str(key),
            "--anchors", anchors,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert f"--anchors {anchors}:" in done.stderr and "not a regular file" in done.stderr
        assert rss < RSS_LIMIT_KB, rss


def test_an_audit_head_that_is_a_fifo_is_no_head_not_a_hang(tmp_path: Path) -> None:
    from lockwatch.actions.audit import AuditLog, Operator, head_path
    from lockwatch.clock import SystemClock

    log = tmp_path / "audit.jsonl"
    key = tmp_path / "keys" / "audit.key"
    AuditLog(
        log, clock=SystemClock(), host="h", operator=Operator("a", "a", None), key_path=key
    ).append("lock_broken", {"reason": "r"})
    head_path(log).unlink()
    os.mkfifo(head_path(log))
    done, _ = run(tmp_path, "audit", "verify", "--audit-log", str(log), "--audit-key", str(key))
    assert done.returncode == 1, done.stderr  # tampered: its head is no head
    assert "head" in done.stdout + done.stderr
