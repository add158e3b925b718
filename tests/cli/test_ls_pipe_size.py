"""`ls --json` asks for a pipe buffer as large as its document (at most what any
user may ask for), never a smaller one; a pipe its reader made smaller than the
kernel's default, a file or a closed descriptor it leaves alone."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from lockwatch.cli import ls as ls_module
from lockwatch.cli.ls import PIPE_MAX, _widen_pipe


def test_a_pipe_grows_to_the_document_never_shrinks() -> None:
    read, write = os.pipe()
    try:
        before = fcntl.fcntl(write, fcntl.F_GETPIPE_SZ)
        _widen_pipe(write, 1000)  # small: left alone
        assert fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) == before
        _widen_pipe(write, 300_000)
        grown = fcntl.fcntl(write, fcntl.F_GETPIPE_SZ)
        assert 300_000 <= grown <= PIPE_MAX
        _widen_pipe(write, 200_000)  # already large enough: kept
        assert fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) == grown
        _widen_pipe(write, 50 * PIPE_MAX)  # at most PIPE_MAX
        assert fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) == PIPE_MAX
    finally:
        os.close(read)
        os.close(write)


def test_a_pipe_larger_than_the_limit_is_not_made_smaller(monkeypatch: pytest.MonkeyPatch) -> None:
    # A pipe someone with the right made larger than the limit (here: the limit lowered).
    monkeypatch.setattr(ls_module, "PIPE_MAX", 1 << 18)
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 1 << 20)
        _widen_pipe(write, 50 << 20)
        assert fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) == 1 << 20
    finally:
        os.close(read)
        os.close(write)


def test_a_pipe_its_reader_shrank_is_kept() -> None:
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
        _widen_pipe(write, 300_000)
        assert fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) == 4096
    finally:
        os.close(read)
        os.close(write)


def test_a_file_or_a_closed_descriptor_is_left_alone(tmp_path: Path) -> None:
    with open(tmp_path / "out.json", "wb") as handle:
        _widen_pipe(handle.fileno(), 10_000_000)  # not a pipe: nothing, no error
    read, write = os.pipe()
    os.close(read)
    os.close(write)
    _widen_pipe(write, 10_000_000)  # closed: nothing, no error
