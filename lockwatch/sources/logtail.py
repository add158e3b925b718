"""A server's log file, read once or followed as it grows (`--pg-log` on
`lockwatch history`, `serve` and the dashboard).

The log is the server's, not lockwatch's, and its lines are the server's
clients' text (a statement, an application name): read as the lock files are,
as untrusted data. The path is never followed through a symlink (`O_NOFOLLOW`,
and a symlink found where the log was is refused, not read), only a regular
file is read (never a FIFO or a device: a read must never block), each line is
cut at `max_line` bytes, and one call reads at most `CHUNK` bytes, so that a
follower catching up on a large log never holds its thread for long.

Following (`LogTail`) keeps the open file and its identity (device, inode): a
rotation (the path now names another file: logrotate's rename, PostgreSQL's
own `log_rotation_age`) is followed once the old file is read to its end; a
file cut short (copytruncate) is read again from its start.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from lockwatch.trusted import kernel_view, special

MAX_LINE = 16 * 1024
MAX_BYTES = 1024 * 1024 * 1024
CHUNK = 1024 * 1024
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def _decode(raw: bytes, max_line: int) -> str:
    return raw[:max_line].decode("utf-8", "replace").rstrip("\r\n")


def open_log(path: Path) -> int:
    """A descriptor of the regular file at `path`, never through a symlink.
    OSError (ELOOP for a symlink) when it cannot or must not be read."""
    fd = os.open(path, _FLAGS)
    try:
        st = os.fstat(fd)
        kind = special(st.st_mode) or kernel_view(st)
        if kind is not None:
            raise OSError(errno.EINVAL, f"{kind}, not a regular file", str(path))
        os.set_blocking(fd, True)  # a regular file: reads return at its end
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_lines(
    path: Path, *, max_line: int = MAX_LINE, max_bytes: int = MAX_BYTES
) -> Iterator[str]:
    """The file's lines, each cut at `max_line`, at most `max_bytes` in all; a
    symlink is refused (OSError)."""
    fd = open_log(path)
    with os.fdopen(fd, "rb") as handle:
        read = 0
        for raw in handle:
            read += len(raw)
            if read > max_bytes:
                return
            yield _decode(raw, max_line)


class LogTail:
    """One log file followed as it grows: `lines()` gives the whole lines
    written since the last call (a line still being written waits for its
    newline), following a rotation by inode. Not thread safe: one follower."""

    def __init__(self, path: Path, *, max_line: int = MAX_LINE) -> None:
        self.path = path
        self.max_line = max_line
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""
        # Why the path cannot be followed now (a symlink, gone), once per cause.
        self.problem: str | None = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def lines(self) -> list[str]:
        """Whole lines new since the last call, at most CHUNK bytes of them."""
        if self._fd is None and not self._open():
            return []
        try:
            found = self._read()
            if len(found[1]) < CHUNK and self._rotated():
                # The old file is read to its end: the new one from its start.
                self.close()
                self._partial = b""
                if self._open():
                    found = (found[0] + self._read()[0], b"")
        except OSError as exc:  # a read error (EIO): opened afresh at the next call
            self.problem = f"{self.path}: {exc.strerror or exc}"
            self.close()
            return []
        return found[0]

    def _open(self) -> bool:
        try:
            st = os.lstat(self.path)
            if stat.S_ISLNK(st.st_mode):
                raise OSError(errno.ELOOP, "a symlink: never followed", str(self.path))
            fd = open_log(self.path)
        except OSError as exc:
            self.problem = f"{self.path}: {exc.strerror or exc}"
            return False
        st = os.fstat(fd)
        self._fd, self._ident, self._offset = fd, (st.st_dev, st.st_ino), 0
        self.problem = None
        return True

    def _rotated(self) -> bool:
        """Whether the path names another file than the one open (or none: a
        rename whose successor is not there yet is followed when it is)."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) != self._ident

    def _read(self) -> tuple[list[str], bytes]:
        assert self._fd is not None
        if os.fstat(self._fd).st_size < self._offset:
            self._offset, self._partial = 0, b""  # cut short: written anew from its start
        chunk = os.pread(self._fd, CHUNK, self._offset)
        self._offset += len(chunk)
        data = self._partial + chunk
        *whole, rest = data.split(b"\n")
        # A line longer than its bound is cut now: the rest of it is skipped.
        self._partial = rest if len(rest) <= self.max_line else rest[: self.max_line]
        return [_decode(raw, self.max_line) for raw in whole], chunk
