"""Following a log file (`sources/logtail.py`, `--pg-log` on serve and the
dashboard): whole lines only, bounded, a rotation followed by inode, a file
cut short read again, never a symlink. Real files in tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lockwatch.sources.logtail import LogTail, read_lines


def test_whole_lines_as_they_are_written(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"one\ntw")
    tail = LogTail(log)
    assert tail.lines() == ["one"]
    assert tail.lines() == []
    with log.open("ab") as handle:
        handle.write(b"o\nthree\n")
    assert tail.lines() == ["two", "three"]
    tail.close()


def test_a_rotation_is_followed_once_the_old_file_is_read(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a\n")
    tail = LogTail(log)
    assert tail.lines() == ["a"]
    with log.open("ab") as handle:
        handle.write(b"b\n")
    log.rename(tmp_path / "server.log.1")  # logrotate's rename
    assert tail.lines() == ["b"]  # the new file is not there yet
    log.write_bytes(b"c\n")
    assert tail.lines() == ["c"]
    tail.close()


def test_a_file_cut_short_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"first line\n")
    tail = LogTail(log)
    assert tail.lines() == ["first line"]
    os.truncate(log, 0)  # copytruncate
    log.write_bytes(b"x\n")
    assert tail.lines() == ["x"]
    tail.close()


def test_a_long_line_is_cut_at_its_bound(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"y" * 100 + b"\nshort\n")
    tail = LogTail(log, max_line=10)
    assert tail.lines() == ["y" * 10, "short"]
    tail.close()


def test_a_symlink_is_never_followed(tmp_path: Path) -> None:
    real = tmp_path / "real.log"
    real.write_bytes(b"secret\n")
    link = tmp_path / "server.log"
    link.symlink_to(real)
    tail = LogTail(link)
    assert tail.lines() == []
    assert tail.problem is not None and "symlink" in tail.problem
    with pytest.raises(OSError):
        list(read_lines(link))
    # A symlink put where the followed file was (after a rotation) is refused too.
    log = tmp_path / "other.log"
    log.write_bytes(b"a\n")
    tail = LogTail(log)
    assert tail.lines() == ["a"]
    log.rename(tmp_path / "other.log.1")
    log.symlink_to(real)
    assert tail.lines() == []
    assert tail.problem is not None
    tail.close()


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    tail = LogTail(fifo)
    assert tail.lines() == []
    assert tail.problem is not None and "regular file" in tail.problem
