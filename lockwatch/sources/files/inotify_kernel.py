"""The kernel's side of inotify(7): its flags, the events it reads back, and the
instance the watcher (inotify.py) adds watches to.

Apart from the watcher so that what is Linux's ABI (fixed numbers, a ctypes
wrapper) is not mixed with lockwatch's policy of what to watch and when; tests
swap `Inotify` for a `Kernel` of their own that fails or counts.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

# inotify(7): the kernel's ABI.
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_DONT_FOLLOW = 0x2000000
IN_EXCL_UNLINK = 0x4000000
IN_ISDIR = 0x40000000


class Event(NamedTuple):
    wd: int
    mask: int
    cookie: int
    name: str  # os.fsdecode'd: bytes that are not UTF-8 come as surrogates, never an error


class Kernel(Protocol):
    """The inotify calls the watcher makes (tests wrap them to fail or to count)."""

    def fileno(self) -> int: ...

    def add_watch(self, path: str, mask: int) -> int: ...

    def rm_watch(self, wd: int) -> None: ...

    def read(self) -> list[Event]: ...

    def close(self) -> None: ...


class Inotify:
    """An inotify instance (inotify_simple: a thin ctypes wrapper), non-blocking."""

    def __init__(self) -> None:
        import inotify_simple  # type: ignore[import-untyped]

        self._instance: Any = inotify_simple.INotify(nonblocking=True)

    def fileno(self) -> int:
        return int(self._instance.fileno())

    def add_watch(self, path: str, mask: int) -> int:
        return int(self._instance.add_watch(path, mask))

    def rm_watch(self, wd: int) -> None:
        self._instance.rm_watch(wd)

    def read(self) -> list[Event]:
        return [
            Event(int(e.wd), int(e.mask), int(e.cookie), str(e.name))
            for e in self._instance.read(timeout=0)
        ]

    def close(self) -> None:
        self._instance.close()
