"""Servers on this host seen without connecting to them: a TCP port some
process listens on (/proc/net/tcp and tcp6) or a Unix socket file that
exists. For the empty dashboard's hints (contract.Hint): what the operator
could watch, never a connection attempt."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lockwatch.sources.contract import Hint

# /proc/net/tcp's `st` column for a listening socket.
LISTEN = "0A"


def listening_ports(ports: Iterable[int], proc: str = "/proc") -> set[int]:
    """Which of `ports` a process on this host listens on (any address)."""
    wanted = set(ports)
    found: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table), encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != LISTEN:
                continue
            port = int(fields[1].rpartition(":")[2] or "0", 16)
            if port in wanted:
                found.add(port)
    return found


def existing_sockets(paths: Iterable[str]) -> list[str]:
    """Those of `paths` that are Unix sockets now."""
    import stat

    found = []
    for path in paths:
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):
                found.append(path)
        except OSError:
            continue
    return found


def server_seen(port: int, sockets: Sequence[str]) -> str | None:
    """How a local server shows itself ("listens on port 5432", or on its
    socket), or None when nothing listens: the words of a source's hint."""
    if listening_ports([port]):
        return f"listens on port {port}"
    found = existing_sockets(sockets)
    return f"listens on {found[0]}" if found else None


def server_hint(server: str, port: int, sockets: Sequence[str], watch: str) -> Hint | None:
    """A source's empty-state hint: `server` ("a PostgreSQL server") seen
    listening here, and `watch`, the flag that would show its locks; None when
    none listens."""
    from lockwatch.sources.contract import Hint

    seen = server_seen(port, sockets)
    if seen is None:
        return None
    return Hint(could_show=f"{server} {seen} on this host, not watched: {watch}")
