"""The client processes of a MySQL or MariaDB server's unix-socket sessions.

PROCESSLIST says only `localhost` for a session over the unix socket: no port to
follow. What the kernel tells, without reading any process's memory:

- the server: the process holding the listening socket at the socket's path (or,
  for a TCP DSN, the one listening on its port, and then its own unix sockets);
- its connections over that socket: its connected unix sockets bound to that
  path (/proc/net/unix), each one's peer from sock_diag (`unix_peers`);
- who holds each peer: a pass over /proc/*/fd (root sees every process; others
  what they may read, and the rest is "not found", never "gone").

Which connection is which thread is not told, so a session gets a process only
where that is unambiguous (see server.py): one client process in all, or the
session's self-reported `_pid` that is one of the connected processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from dataclasses import dataclass

from lockwatch.sources.clients import Owners, listening_on, unix_peers

_ACCEPTCON = 0x10000  # a listening socket (__SO_ACCEPTCON in /proc/net/unix's Flags)
_STREAM = 1
_CONNECTED = 3


@dataclass(frozen=True, slots=True)
class _UnixEntry:
    inode: int
    flags: int
    kind: int
    state: int
    path: str


@dataclass(frozen=True, slots=True)
class UnixClients:
    """The server's connections over its unix socket(s), as one pass saw them."""

    server_pid: int
    # Per connection (the server's socket inode): the client end's socket inode (0
    # when that end is gone) and the processes holding it (empty: not found).
    connections: dict[int, tuple[int, tuple[int, ...]]]
    complete: bool  # every process's open files could be read
    held: frozenset[int]  # every socket inode some process holds

    def pids(self) -> set[int]:
        """Every process connected to the server over its unix socket."""
        return {pid for _, holders in self.connections.values() for pid in holders}

    def sole(self) -> int | None:
        """The one process holding every connection's client end, if there is one
        and nothing is left unaccounted for."""
        if not self.complete or not self.connections:
            return None
        groups = {holders for _, holders in self.connections.values()}
        if len(groups) != 1:
            return None
        (holders,) = groups
        return holders[0] if len(holders) == 1 else None


def read_unix(path: str = "/proc/net/unix") -> list[_UnixEntry]:
    entries: list[_UnixEntry] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.readlines()[1:]
    except OSError:
        return entries
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) < 8:
            continue  # unbound: no path, so not the server's
        with contextlib.suppress(ValueError):
            entries.append(
                _UnixEntry(
                    int(fields[6]),
                    int(fields[3], 16),
                    int(fields[4], 16),
                    int(fields[5], 16),
                    fields[7].rstrip("\n"),
                )
            )
    return entries


def unix_clients(
    paths: Collection[str],
    port: int | None,
    exclude: Collection[int] = (),
    *,
    proc: str = "/proc",
) -> UnixClients | None:
    """The server listening at one of `paths` (else on TCP `port`) and its unix
    connections' client processes; None when the server is not found here.
    `exclude`: client socket inodes to leave out (lockwatch's own connection)."""
    entries = [e for e in read_unix(f"{proc}/net/unix") if e.kind == _STREAM]
    owners = Owners(proc)
    owners.scan(None)
    listening = [e for e in entries if e.flags & _ACCEPTCON and e.path in set(paths)]
    if listening:
        servers = {pid for e in listening for pid in owners.by_inode.get(e.inode, ())}
    elif port:
        servers = {
            pid for inode in listening_on(port, proc) for pid in owners.by_inode.get(inode, ())
        }
    else:
        return None
    if len(servers) != 1:
        return None  # not here, not readable, or more than one: say nothing
    (server,) = servers
    mine = set(owners.sockets_of(server) or ())
    bound = {e.path for e in entries if e.flags & _ACCEPTCON and e.inode in mine}
    if not bound:
        return None
    peers = unix_peers()
    if peers is None:
        return None
    connections: dict[int, tuple[int, tuple[int, ...]]] = {}
    complete = owners.unreadable == 0
    for entry in entries:
        if entry.flags & _ACCEPTCON or entry.state != _CONNECTED or entry.path not in bound:
            continue
        if entry.inode not in mine:
            continue
        if entry.inode not in peers:
            complete = False  # gone between the reads: cannot account for it
            continue
        peer = peers[entry.inode]
        if peer in exclude:
            continue
        holders = tuple(sorted(owners.by_inode.get(peer, ()))) if peer else ()
        connections[entry.inode] = (peer, holders)
    return UnixClients(server, connections, complete, frozenset(owners.by_inode))


def start_time(pid: int, proc: str = "/proc") -> int | None:
    """A process's start (clock ticks since boot): with its pid, who it is."""
    try:
        with open(f"{proc}/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    try:
        return int(stat.rpartition(")")[2].split()[19])
    except (IndexError, ValueError):
        return None
