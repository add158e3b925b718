"""`lockwatch ls` on a source it cannot reach: what failed comes first, and never
"Nothing to look at." (which reads as "no locks" when the news is "could not
connect")."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound but not listening: every connection is refused, and
    no other process can take the port while the test runs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def _asked(kind: str, port: int) -> list[str]:
    if kind == "remote":
        return ["--remote", f"http://127.0.0.1:{port}"]
    return ["--pg", f"postgresql://postgres@127.0.0.1:{port}/postgres"]


FAILED = {"remote": "unreachable", "pg": "connection failed"}


@pytest.mark.parametrize("kind", ["remote", "pg"])
def test_a_source_that_cannot_be_reached_is_said_first_and_alone(
    kind: str, closed_port: int, tmp_path: Path
) -> None:
    # As on a terminal: both streams in one, in the order they were written.
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", *_asked(kind, closed_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines, done.stdout
    assert lines[0].startswith("lockwatch: ") and FAILED[kind] in lines[0], lines
    assert "Connection refused" in lines[0]
    assert "Nothing to look at" not in done.stdout


def test_nothing_found_beside_a_source_down_says_where_it_looked(
    closed_port: int, tmp_path: Path
) -> None:
    code, out, err = run_cli("ls", str(tmp_path), *_asked("remote", closed_port))
    assert code == 1
    assert out.strip() == (
        f"No locks under {tmp_path} (looked for *.lock, *.pid, lock directories and files"
        " tools name their own way, and files the kernel holds a lock on)."
    )
    assert "unreachable" in err


def test_nothing_found_with_every_source_read_says_so(tmp_path: Path) -> None:
    code, out, err = run_cli("ls", str(tmp_path))
    assert code == 0 and err == ""
    assert out.startswith("No locks under")
