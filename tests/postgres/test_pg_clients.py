"""Finding a session's client process on this host, against a /proc built for the test
(the real thing is exercised by test_pg_honest.py): what is found, what is proof that
a client is gone, and where nothing may be said."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from lockwatch.sources.clients import (
    Owners,
    Session,
    dump_tcp,
    parse_address,
    read_sockets,
    read_tcp,
)
from lockwatch.sources.postgres.clients import find_clients
from lockwatch.sources.postgres.facts import PgClient
from lockwatch.sources.postgres.terms import local_client

SERVER_PORT = 5432
ESTABLISHED, CLOSE_WAIT, FIN_WAIT2, LISTEN = 0x01, 0x08, 0x05, 0x0A
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"  # noqa: E501


def hex4(address: str, port: int) -> str:
    """An IPv4 address as /proc/net/tcp writes it on a little-endian host."""
    a, b, c, d = (int(x) for x in address.split("."))
    return f"{d:02X}{c:02X}{b:02X}{a:02X}:{port:04X}"


def line(local: tuple[str, int], remote: tuple[str, int], state: int, inode: int) -> str:
    return (
        f"   0: {hex4(*local)} {hex4(*remote)} {state:02X} 00000000:00000000 00:00000000"
        f" 00000000   113        0 {inode} 1 0000000000000000 20 4 30 10 -1\n"
    )


class FakeProc:
    """A /proc with the processes a test needs: open sockets, a command line, a netns."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ns("self", "net:[4026531840]")

    def process(self, pid: int, cmdline: tuple[str, ...], *sockets: int) -> None:
        fd = self.root / str(pid) / "fd"
        fd.mkdir(parents=True, exist_ok=True)
        for n, inode in enumerate(sockets, start=3):
            os.symlink(f"socket:[{inode}]", fd / str(n))
        os.symlink("/dev/null", fd / "0")
        (self.root / str(pid) / "cmdline").write_bytes(b"\0".join(c.encode() for c in cmdline))

    def ns(self, pid: int | str, net: str) -> None:
        ns = self.root / str(pid) / "ns"
        ns.mkdir(parents=True, exist_ok=True)
        os.symlink(net, ns / "net")

    def unreadable(self, pid: int) -> None:
        (self.root / str(pid)).mkdir()
        # A "fd" that is a file: listing it fails, as another user's /proc/<pid>/fd does.
        (self.root / str(pid) / "fd").write_text("")


@pytest.fixture
def proc(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path / "proc")


def tcp_table(tmp_path: Path, *lines: str) -> list:  # type: ignore[type-arg]
    table = tmp_path / "tcp"
    table.write_text(HEADER + "".join(lines))
    return read_tcp([str(table)])


SERVER = ("127.0.0.1", SERVER_PORT)
CLIENT = ("127.0.0.1", 50123)
SESSION = Session(pid=4242, client="127.0.0.1", client_port=50123)


def test_addresses_as_the_kernel_writes_them() -> None:
    assert parse_address("0100007F:1538") == ("127.0.0.1", 5432)
    assert parse_address("00000000000000000000000001000000:1538") == ("::1", 5432)
    # A v4 client on a dual-stack socket: the address pg_stat_activity shows.
    assert parse_address("0000000000000000FFFF00000100007F:C3CB") == ("127.0.0.1", 50123)


def test_the_kernels_sock_diag_answer_is_its_tcp_tables() -> None:
    """dump_tcp (netlink, what a poll reads) sees what /proc/net/tcp* show, with
    real connections open: v4, v6 and v4 on a dual-stack socket, each end."""
    opened: list[socket.socket] = []
    pairs: set[tuple[tuple[str, int], tuple[str, int]]] = set()
    try:
        for family, bind, targets in (
            (socket.AF_INET, "127.0.0.1", ["127.0.0.1"]),
            (socket.AF_INET6, "::", ["::1", "127.0.0.1"]),
        ):
            listener = socket.socket(family, socket.SOCK_STREAM)
            opened.append(listener)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            listener.bind((bind, 0))
            listener.listen()
            for target in targets:
                client = socket.create_connection((target, listener.getsockname()[1]))
                server = listener.accept()[0]
                opened += [client, server]
                for sock in (client, server):
                    local, remote = sock.getsockname()[:2], sock.getpeername()[:2]
                    pairs.add(((_v4(local[0]), local[1]), (_v4(remote[0]), remote[1])))
        dumped = dump_tcp()
        assert dumped is not None, "sock_diag could not be asked"
        read = read_tcp()
        # Other sockets come and go on a shared host between the two reads: ours stay.
        seen = {
            (e.local, e.remote, e.state, e.inode) for e in dumped if (e.local, e.remote) in pairs
        }
        told = {(e.local, e.remote, e.state, e.inode) for e in read if (e.local, e.remote) in pairs}
        assert len(seen) == len(pairs) == 6
        assert seen == told
        assert all(e.state != LISTEN for e in dumped)
    finally:
        for sock in opened:
            sock.close()


def _v4(address: str) -> str:
    return address.removeprefix("::ffff:")


def test_which_clients_are_on_the_servers_host() -> None:
    assert local_client("local") and local_client("127.0.0.1") and local_client("::1")
    assert local_client("127.0.0.2") and local_client("::ffff:127.0.0.1")
    assert not local_client("10.0.0.5") and not local_client(None) and not local_client("db1")


def test_a_live_client_is_the_process_holding_its_end(tmp_path: Path, proc: FakeProc) -> None:
    table = tcp_table(
        tmp_path,
        line(SERVER, ("0.0.0.0", 0), LISTEN, 100),
        line(SERVER, CLIENT, ESTABLISHED, 900),
        line(CLIENT, SERVER, ESTABLISHED, 901),
    )
    proc.process(4321, ("python", "worker.py"), 901)
    proc.process(4322, ("python", "other.py"), 555)
    found = find_clients([SESSION], SERVER_PORT, proc=str(proc.root), tcp=table)
    assert found == {4242: PgClient(pid=4321, cmdline=("python", "worker.py"), alive=True)}


def test_a_forked_client_is_named_by_its_oldest_holder(tmp_path: Path, proc: FakeProc) -> None:
    table = tcp_table(
        tmp_path, line(SERVER, CLIENT, ESTABLISHED, 900), line(CLIENT, SERVER, ESTABLISHED, 901)
    )
    proc.process(5000, ("gunicorn", "worker"), 901)
    proc.process(4999, ("gunicorn", "master"), 901)
    found = find_clients([SESSION], SERVER_PORT, proc=str(proc.root), tcp=table)
    assert found[4242] == PgClient(pid=4999, cmdline=("gunicorn", "master"), alive=True)


@pytest.mark.parametrize(
    "client_end",
    [
        line(CLIENT, SERVER, FIN_WAIT2, 0),  # a killed process's socket, orphaned
        "",  # closed and gone
    ],
)
def test_a_client_end_that_is_gone_is_proof(
    tmp_path: Path, proc: FakeProc, client_end: str
) -> None:
    table = tcp_table(tmp_path, line(SERVER, CLIENT, CLOSE_WAIT, 900), client_end)
    proc.process(4321, ("python", "worker.py"), 77)
    found = find_clients([SESSION], SERVER_PORT, proc=str(proc.root), tcp=table)
    assert found == {4242: PgClient(pid=None, alive=False)}


def test_nothing_is_said_where_the_server_end_is_not_seen(tmp_path: Path, proc: FakeProc) -> None:
    # The server is elsewhere (or in another network namespace): its clients' ends
    # missing here say nothing about them.
    table = tcp_table(tmp_path, line(("127.0.0.1", 6000), CLIENT, ESTABLISHED, 900))
    assert find_clients([SESSION], SERVER_PORT, proc=str(proc.root), tcp=table) == {}


def test_nothing_is_said_when_the_holder_cannot_be_seen(tmp_path: Path, proc: FakeProc) -> None:
    table = tcp_table(
        tmp_path, line(SERVER, CLIENT, ESTABLISHED, 900), line(CLIENT, SERVER, ESTABLISHED, 901)
    )
    proc.unreadable(4321)  # another user's process: its open files are not ours to list
    assert find_clients([SESSION], SERVER_PORT, proc=str(proc.root), tcp=table) == {}


def test_clients_on_other_hosts_are_not_looked_up(tmp_path: Path, proc: FakeProc) -> None:
    remote = Session(pid=4242, client="10.0.0.5", client_port=50123)
    table = tcp_table(tmp_path, line(SERVER, ("10.0.0.5", 50123), ESTABLISHED, 900))
    assert find_clients([remote], SERVER_PORT, proc=str(proc.root), tcp=table) == {}
    # Hidden from lockwatch's role: no address, no port, nothing to look for.
    hidden = Session(pid=4242, client=None, client_port=None)
    assert find_clients([hidden], SERVER_PORT, proc=str(proc.root), tcp=table) == {}


BACKEND = ("postgres: 15/main: app appdb [local] idle in transaction",)
UNIX = Session(pid=777, client="local", client_port=-1)


def test_a_unix_socket_client_through_its_peer(proc: FakeProc) -> None:
    proc.process(777, BACKEND, 500)
    proc.ns(777, "net:[4026531840]")
    proc.process(4321, ("python", "worker.py"), 501)
    peers = {500: 501, 501: 500, 42: 0}
    found = find_clients([UNIX], SERVER_PORT, proc=str(proc.root), peers=peers)
    assert found == {777: PgClient(pid=4321, cmdline=("python", "worker.py"), alive=True)}
    # Its client end closed: the backend's socket has no peer any more.
    assert find_clients([UNIX], SERVER_PORT, proc=str(proc.root), peers={500: 0}) == {
        777: PgClient(pid=None, alive=False)
    }


@pytest.mark.parametrize("trouble", ["netns", "not_a_backend", "unreadable", "no_diag"])
def test_a_unix_socket_client_is_never_guessed(proc: FakeProc, trouble: str) -> None:
    if trouble == "unreadable":
        proc.unreadable(777)
    else:
        proc.process(777, BACKEND if trouble != "not_a_backend" else ("python", "x"), 500)
    proc.ns(777, "net:[999]" if trouble == "netns" else "net:[4026531840]")
    peers = None if trouble == "no_diag" else {500: 0}
    if peers is None:
        # What the kernel answers about this host's real sockets says nothing of these.
        found = find_clients([UNIX], SERVER_PORT, proc=str(proc.root), peers={})
    else:
        found = find_clients([UNIX], SERVER_PORT, proc=str(proc.root), peers=peers)
    assert found == {}


def test_sockets_read_ahead_of_the_query_serve_the_lookup(tmp_path: Path, proc: FakeProc) -> None:
    """Read while the poll's query runs: a session it already shows is matched; one
    that connected after is not found (never taken for gone)."""
    proc.process(4321, ("python", "worker.py"), 901)
    table = tcp_table(
        tmp_path, line(SERVER, CLIENT, ESTABLISHED, 900), line(CLIENT, SERVER, ESTABLISHED, 901)
    )
    ahead = read_sockets(str(proc.root))
    ahead.tcp = table
    newer = Session(pid=4243, client="127.0.0.1", client_port=50999)
    found = find_clients([SESSION, newer], SERVER_PORT, proc=str(proc.root), ahead=ahead)
    assert found == {4242: PgClient(pid=4321, cmdline=("python", "worker.py"), alive=True)}


def test_a_scan_reads_processes_only_as_far_as_it_must(proc: FakeProc) -> None:
    """Processes are read lowest pid first and only until each wanted socket has a
    holder; a later look-up goes on from there and still finds the rest."""
    proc.process(100, ("a",), 901)
    proc.process(200, ("b",), 902, 901)
    proc.process(300, ("c",), 903)
    owners = Owners(str(proc.root))
    owners.scan({901})
    assert owners.by_inode == {901: [100]}  # 200 and 300 not read
    owners.scan({903})
    assert owners.by_inode == {901: [100, 200], 902: [200], 903: [300]}
    owners.scan({904})  # nobody holds it: every process read, each once
    assert owners.by_inode[901] == [100, 200]


def test_sockets_read_ahead_find_the_clients_of_the_servers_port(
    tmp_path: Path, proc: FakeProc
) -> None:
    """Read ahead with the server's port: the processes holding the client ends of
    connections to it are found before the sessions are known, and no further."""
    proc.process(4321, ("python", "worker.py"), 901)
    proc.process(4400, ("python", "other.py"), 777)
    table = tcp_table(
        tmp_path, line(SERVER, CLIENT, ESTABLISHED, 900), line(CLIENT, SERVER, ESTABLISHED, 901)
    )
    ahead = read_sockets(str(proc.root), server_port=SERVER_PORT, tcp=table)
    assert ahead.owners.by_inode == {901: [4321]}  # 4400 not read
    found = find_clients([SESSION], SERVER_PORT, proc=str(proc.root), ahead=ahead)
    assert found == {4242: PgClient(pid=4321, cmdline=("python", "worker.py"), alive=True)}
