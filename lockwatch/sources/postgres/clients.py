"""Who is at the other end of a PostgreSQL session: its client process on this
host, found through the kernel's socket tables (sources/clients.py, shared by
the server sources); here only what is PostgreSQL's: its client records, and
how a backend serving a unix-socket client is told."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lockwatch.sources import clients
from lockwatch.sources.clients import Session, Sockets, TcpEntry, cmdline, read_sockets
from lockwatch.sources.postgres.facts import PgClient

__all__ = ["Session", "Sockets", "find_clients", "read_sockets"]


def _is_backend(pid: int, proc: str) -> bool:
    """Whether `pid` here is a PostgreSQL backend serving a unix-socket client
    (`postgres: [cluster: ]user db [local] state`)."""
    command = " ".join(cmdline(pid, proc))
    return command.startswith(("postgres:", "postmaster:")) and "[local]" in command


def find_clients(
    sessions: Sequence[Session],
    server_port: int | None,
    *,
    proc: str = "/proc",
    tcp: Sequence[TcpEntry] | None = None,
    peers: Mapping[int, int] | None = None,
    ahead: Sockets | None = None,
) -> dict[int, PgClient | None]:
    """Each backend's client process on this host (`clients.find_clients`)."""
    return clients.find_clients(
        sessions,
        server_port,
        PgClient,
        is_backend=_is_backend,
        proc=proc,
        tcp=tcp,
        peers=peers,
        ahead=ahead,
    )
