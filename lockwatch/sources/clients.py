"""Who is at the other end of a server's session: its client process on this
host. Shared by the server sources (PostgreSQL's sessions, MySQL's TCP and unix
socket connections): each names its sessions, and what its client records are.

A session whose client is on the server's own host (a loopback address or a unix
socket) can be followed to the process that holds the client end of the
connection, through the kernel's socket tables and the processes' open files:

- TCP: the server's end of the connection (local port = the server's port, peer
  = the session's client_addr:client_port) must be in this host's table — else
  the server is not here (or in another network namespace) and nothing is said.
  The client's end is the entry the other way round: gone, or orphaned (inode 0,
  what a killed process leaves), means the client is gone while its backend
  lives on; otherwise the process holding that socket (/proc/<pid>/fd) is it.
- Unix sockets: the backend's own socket (/proc/<backend>/fd, which needs root or
  the server's OS user) and its peer, from the kernel's sock_diag interface.

Nothing here guesses: when an end cannot be seen, or a process's open files
cannot be read, the answer is None (not found), never "gone". A wrong "gone"
makes a live lock stale.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import struct
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from lockwatch.model.hosts import is_local_address
from lockwatch.model.slots import lean_dataclass

_TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_LISTEN = 0x0A

Address = tuple[str, int]

# A source's record of a client process: made as make(pid, cmdline, alive), pid
# None when the client's end is gone and nobody saw who had it.
C = TypeVar("C")
MakeClient = Callable[[int | None, tuple[str, ...], bool], C]


def local_client(client: str | None) -> bool:
    """Whether a session's client address is on the server's own host: a unix
    socket (`local`) or a loopback address."""
    if client is None:
        return False
    return client == "local" or is_local_address(client)


@lean_dataclass(frozen=True, slots=True)
class Session:
    """What the server says of one session's client (pg_stat_activity, MySQL's
    PROCESSLIST): `pid` is the session's (a backend, a thread id)."""

    pid: int
    client: str | None  # host(client_addr), or "local" for a unix socket
    client_port: int | None


@lean_dataclass(frozen=True, slots=True)
class TcpEntry:
    local: Address
    remote: Address
    state: int
    inode: int


_MAPPED = b"\0" * 10 + b"\xff\xff"


def parse_address(hex_address: str) -> Address:
    """`0100007F:1538` (IPv4) or the 32-hex-digit IPv6 form, as /proc/net/tcp* write
    them (each 32-bit word in host byte order), to (canonical text, port)."""
    host, _, port = hex_address.partition(":")
    raw = b"".join(
        int(host[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(host), 8)
    )
    if len(raw) == 16 and raw.startswith(_MAPPED):
        raw = raw[12:]  # a v4 address on a dual-stack socket, as the server shows it
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, raw), int(port, 16)


def canonical(address: str) -> str:
    """An address as `parse_address` writes it, to compare the two as text."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    mapped = getattr(parsed, "ipv4_mapped", None)
    return str(mapped or parsed)


def _tcp_lines(tables: Iterable[str]) -> Iterator[list[str]]:
    """Each socket's fields in /proc/net/tcp-like `tables` (a table that cannot
    be read: none of its sockets)."""
    for table in tables:
        try:
            with open(table, encoding="ascii") as handle:
                lines = handle.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            yield line.split()


def listening_on(port: int, proc: str = "/proc") -> set[int]:
    """The inodes of the sockets listening on TCP `port` here."""
    found: set[int] = set()
    for fields in _tcp_lines((f"{proc}/net/tcp", f"{proc}/net/tcp6")):
        with contextlib.suppress(ValueError, IndexError):
            if int(fields[3], 16) == _LISTEN and parse_address(fields[1])[1] == port:
                found.add(int(fields[9]))
    return found


def read_tcp(
    tables: Iterable[str] = _TCP_TABLES, ports: Collection[int] | None = None
) -> list[TcpEntry]:
    """The kernel's TCP sockets in this network namespace (listening ones left out);
    with `ports`, only those whose local port is one of them."""
    entries: list[TcpEntry] = []
    for fields in _tcp_lines(tables):
        if len(fields) < 10 or fields[3] == "0A":  # too short, or LISTEN
            continue
        with contextlib.suppress(ValueError):
            local = fields[1]
            if ports is not None and int(local.rpartition(":")[2], 16) not in ports:
                continue
            entries.append(
                TcpEntry(
                    parse_address(local),
                    parse_address(fields[2]),
                    int(fields[3], 16),
                    int(fields[9]),
                )
            )
    return entries


def dump_tcp() -> list[TcpEntry] | None:
    """`read_tcp()`'s answer from the kernel's sock_diag interface (NETLINK_INET_DIAG):
    the same sockets as /proc/net/tcp*, in this network namespace, without the
    kernel writing and this process parsing a line of text per socket (a busy
    host has thousands); None where that cannot be asked."""
    entries: list[TcpEntry] = []
    for family in (socket.AF_INET, socket.AF_INET6):
        if not _dump_tcp_family(family, entries):
            return None
    return entries


_INET_DIAG_MSG = struct.Struct("=BBBBHH16s16s")  # family, state, timer, retrans, id...
_ALL_BUT_LISTEN = 0xFFFFFFFF & ~(1 << _LISTEN)


class _DumpFailed(Exception):
    """A sock_diag dump cut short or refused."""


def _sock_diag(request: bytes) -> Iterator[tuple[bytes, int, int]]:
    """Each message of a sock_diag dump (NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY) as
    (the datagram, the offset of its body, its body's length), until the kernel
    says done; _DumpFailed (or OSError) when it is cut short or refused."""
    netlink_sock_diag, sock_diag_by_family = 4, 20
    request_flags = 0x1 | 0x300  # NLM_F_REQUEST | NLM_F_DUMP
    done, error = 3, 2
    header = struct.pack("=IHHII", 16 + len(request), sock_diag_by_family, request_flags, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, netlink_sock_diag) as nl:
        nl.settimeout(2.0)
        nl.sendto(header + request, (0, 0))
        while True:
            data = nl.recv(1 << 20)
            if not data:
                raise _DumpFailed
            offset = 0
            while offset + 16 <= len(data):
                length, kind, _, _, _ = struct.unpack_from("=IHHII", data, offset)
                if length < 16 or kind == error:
                    raise _DumpFailed
                if kind == done:
                    return
                yield data, offset + 16, length - 16
                offset += (length + 3) & ~3


def _dump_tcp_family(family: int, entries: list[TcpEntry]) -> bool:
    # inet_diag_req_v2: family, protocol, ext, pad, states, then a zeroed sockid.
    request = struct.pack("=BBBxI48x", family, socket.IPPROTO_TCP, 0, _ALL_BUT_LISTEN)
    v4 = family == socket.AF_INET
    names: dict[bytes, str] = {}  # a host's few addresses, each written once

    def name(raw: bytes) -> str:
        text = names.get(raw)
        if text is None:
            if v4:
                text = socket.inet_ntop(socket.AF_INET, raw[:4])
            elif raw.startswith(_MAPPED):
                text = socket.inet_ntop(socket.AF_INET, raw[12:])
            else:
                text = socket.inet_ntop(socket.AF_INET6, raw)
            names[raw] = text
        return text

    unpack_msg, unpack_inode = _INET_DIAG_MSG.unpack_from, struct.Struct("=I").unpack_from
    try:
        for data, at, size in _sock_diag(request):
            if size >= 72:  # an inet_diag_msg
                _, state, _, _, sport, dport, src, dst = unpack_msg(data, at)
                if state != _LISTEN:
                    entries.append(
                        TcpEntry(
                            (name(src), socket.ntohs(sport)),
                            (name(dst), socket.ntohs(dport)),
                            state,
                            unpack_inode(data, at + 68)[0],
                        )
                    )
    except (_DumpFailed, OSError, struct.error):
        return False
    return True


class Owners:
    """Which processes hold which sockets open, from /proc/*/fd: each process read
    at most once, in ascending pid order, and only as far as a look-up needs."""

    def __init__(self, proc: str = "/proc") -> None:
        self._proc = proc
        self.by_inode: dict[int, list[int]] = {}
        self.unreadable = 0  # processes whose open files could not be listed
        self._left: list[int] | None = None  # pids not read yet, the lowest last

    def scan(self, wanted: Collection[int] | None) -> None:
        """Find the holders of the `wanted` socket inodes (None: of every socket).
        Reading stops once each wanted inode has a holder: a host has thousands of
        open files, a poll's clients are often in a few processes. Stopping there
        changes no answer: processes are read lowest pid first, and the lowest pid
        is the holder a look-up names (`_found`); every socket of each process read
        is kept, so a later scan goes on from where this one stopped."""
        if wanted is not None and not wanted:
            return
        left = self._pids()
        missing = None if wanted is None else {i for i in wanted if i not in self.by_inode}
        while left and (missing is None or missing):
            pid = left.pop()
            for inode in self._sockets(pid, count_unreadable=True):
                self.by_inode.setdefault(inode, []).append(pid)
                if missing:
                    missing.discard(inode)

    def _pids(self) -> list[int]:
        if self._left is None:
            try:
                pids = [int(e.name) for e in os.scandir(self._proc) if e.name.isdigit()]
            except OSError:
                self.unreadable += 1
                pids = []
            self._left = sorted(pids, reverse=True)
        return self._left

    def _sockets(self, pid: int, count_unreadable: bool = False) -> list[int]:
        found: list[int] = []
        try:
            entries = list(os.scandir(f"{self._proc}/{pid}/fd"))
        except FileNotFoundError:
            return found  # exited meanwhile
        except OSError:
            if count_unreadable:
                self.unreadable += 1
            return found
        for entry in entries:
            try:
                target = os.readlink(entry.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                with contextlib.suppress(ValueError):
                    found.append(int(target[8:-1]))
        return found

    def sockets_of(self, pid: int) -> list[int] | None:
        """The socket inodes `pid` holds, or None when they cannot be read."""
        try:
            entries = list(os.scandir(f"{self._proc}/{pid}/fd"))
        except OSError:
            return None
        found: list[int] = []
        for entry in entries:
            with contextlib.suppress(OSError, ValueError):
                target = os.readlink(entry.path)
                if target.startswith("socket:["):
                    found.append(int(target[8:-1]))
        return found


@lean_dataclass
class Sockets:
    """This host's TCP table and who holds which socket, read ahead: while a poll's
    query runs on the server, so that its answer is matched at once."""

    tcp: list[TcpEntry]
    owners: Owners


def read_sockets(
    proc: str = "/proc", server_port: int | None = None, tcp: list[TcpEntry] | None = None
) -> Sockets:
    """This host's TCP table, and the processes holding the client ends of its
    connections to `server_port` found (`Owners.scan`): the sessions a poll
    looks up are among them. Not this process's own ends: lockwatch's own
    connection is no session of interest, and this process, usually the newest,
    would be read last, after every other one. `tcp`: the table, already read."""
    owners = Owners(proc)
    table = tcp if tcp is not None else dump_tcp()
    if table is None:
        table = read_tcp()
    if server_port:
        ends = {e.inode for e in table if e.remote[1] == server_port and e.inode}
        owners.scan(ends.difference(owners.sockets_of(os.getpid()) or ()))
    return Sockets(table, owners)


def cmdline(pid: int, proc: str = "/proc") -> tuple[str, ...]:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as handle:
            raw = handle.read(8192)
    except OSError:
        return ()
    return tuple(part.decode("utf-8", "replace") for part in raw.split(b"\0") if part)


def _net_namespace(pid: int | str, proc: str = "/proc") -> str | None:
    try:
        return os.readlink(f"{proc}/{pid}/ns/net")
    except OSError:
        return None


def unix_peers() -> dict[int, int] | None:
    """Every unix socket's peer (inode -> peer inode, 0 when it has none), from the
    kernel's sock_diag interface, in this network namespace; None where that
    cannot be asked."""
    show_name_peer = 0x4  # UDIAG_SHOW_PEER
    unix_diag_peer = 2
    request = struct.pack("=BBHIII8x", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, show_name_peer)
    peers: dict[int, int] = {}
    try:
        for data, start, size in _sock_diag(request):
            body = data[start : start + size]
            if len(body) >= 16:
                inode = struct.unpack_from("=I", body, 4)[0]
                peer = 0
                at = 16
                while at + 4 <= len(body):
                    length, attr = struct.unpack_from("=HH", body, at)
                    if length < 4:
                        break
                    if attr == unix_diag_peer and length >= 8:
                        peer = struct.unpack_from("=I", body, at + 4)[0]
                    at += (length + 3) & ~3
                peers[inode] = peer
    except (_DumpFailed, OSError, struct.error):
        return None
    return peers


def _found(pids: Sequence[int], proc: str, known: dict[int, C], make: MakeClient[C]) -> C:
    pid = min(pids)  # a forked client shares its socket: the oldest pid is the parent
    client = known.get(pid)
    if client is None:  # one program often has many sessions: read it once
        client = known[pid] = make(pid, cmdline(pid, proc), True)
    return client


def _never(pid: int, proc: str) -> bool:
    return False


def find_clients(
    sessions: Sequence[Session],
    server_port: int | None,
    make: MakeClient[C],
    *,
    is_backend: Callable[[int, str], bool] = _never,
    proc: str = "/proc",
    tcp: Sequence[TcpEntry] | None = None,
    peers: Mapping[int, int] | None = None,
    ahead: Sockets | None = None,
) -> dict[int, C | None]:
    """Each session's client process on this host (alive), or a client made with
    `alive` False when its end of the connection is gone; None where it cannot be
    found. Only sessions whose client is on the server's host are looked up; a
    unix-socket session (client `local`) only when `is_backend(pid, proc)` says
    its pid is the server's process serving it (whose peer is its client).
    `ahead`: the sockets as read just before the sessions were (`read_sockets`): a
    session newer than that is not found, never taken for gone."""
    result: dict[int, C | None] = {}
    owners = Owners(proc) if ahead is None else ahead.owners
    if ahead is not None and tcp is None:
        tcp = ahead.tcp
    # pid -> the client's socket inode, once each end is placed
    client_inode: dict[int, int] = {}
    on_host = {client: local_client(client) for client in {s.client for s in sessions}}
    local = [s for s in sessions if on_host[s.client]]
    tcp_sessions = [s for s in local if s.client != "local" and (s.client_port or 0) > 0]
    unix_sessions = [s for s in local if s.client == "local"]
    if tcp_sessions and server_port:
        _tcp_ends(tcp_sessions, server_port, tcp, make, result, client_inode)
    if unix_sessions:
        _unix_ends(unix_sessions, proc, peers, is_backend, owners, make, result, client_inode)
    owners.scan(set(client_inode.values()))
    known: dict[int, C] = {}
    for pid, inode in client_inode.items():
        holders = owners.by_inode.get(inode)
        if holders:
            result[pid] = _found(holders, proc, known, make)
        # else: someone lockwatch may not look at holds it; say nothing
    return result


def _tcp_ends(
    tcp_sessions: Sequence[Session],
    server_port: int,
    tcp: Sequence[TcpEntry] | None,
    make: MakeClient[C],
    result: dict[int, C | None],
    client_inode: dict[int, int],
) -> None:
    """Place each TCP session's client end: its socket inode into `client_inode`,
    or a gone client into `result` when only the server's end is left."""
    ports = {server_port, *(s.client_port for s in tcp_sessions if s.client_port)}
    table = read_tcp(ports=ports) if tcp is None else tcp
    # Each end by its (local, remote) pair: one look-up per session, not a
    # walk of every connection to the server (a pooler has hundreds).
    ends: dict[tuple[Address, Address], list[TcpEntry]] = {}
    for entry in table:
        if entry.state != _LISTEN and entry.local[1] in ports:
            ends.setdefault((entry.local, entry.remote), []).append(entry)
    servers: dict[Address, list[Address]] = {}
    for here, there in ends:
        if here[1] == server_port:
            servers.setdefault(there, []).append(here)
    texts: dict[str, str] = {}
    for session in tcp_sessions:
        assert session.client is not None and session.client_port is not None
        address = texts.get(session.client)
        if address is None:
            address = texts[session.client] = canonical(session.client)
        client_end: Address = (address, session.client_port)
        server_ends = [
            entry for here in servers.get(client_end, ()) for entry in ends[(here, client_end)]
        ]
        if len(server_ends) != 1:
            continue  # the server is not on this host (or not in this namespace)
        server_end = server_ends[0].local
        mine = ends.get((client_end, server_end), [])
        if all(e.inode == 0 for e in mine):
            # The server still has its end; the client's is closed, or left to
            # the kernel by a process that died: nobody is there any more.
            result[session.pid] = make(None, (), False)
            continue
        client_inode[session.pid] = next(e.inode for e in mine if e.inode)


def _unix_ends(
    unix_sessions: Sequence[Session],
    proc: str,
    peers: Mapping[int, int] | None,
    is_backend: Callable[[int, str], bool],
    owners: Owners,
    make: MakeClient[C],
    result: dict[int, C | None],
    client_inode: dict[int, int],
) -> None:
    """Place each unix-socket session's client end by its server process's peer."""
    ours = _net_namespace("self", proc)
    diag = unix_peers() if peers is None else peers
    for session in unix_sessions:
        if diag is None or ours is None or _net_namespace(session.pid, proc) != ours:
            continue
        if not is_backend(session.pid, proc):
            continue
        sockets = owners.sockets_of(session.pid)
        connected = [inode for inode in sockets or () if inode in diag]
        if len(connected) != 1:
            continue  # unreadable, or not one client socket: cannot tell which
        peer = diag[connected[0]]
        if peer == 0:
            result[session.pid] = make(None, (), False)
            continue
        client_inode[session.pid] = peer
