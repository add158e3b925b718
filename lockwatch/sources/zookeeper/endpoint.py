"""Where a ZooKeeper ensemble is and what to call it.

`--zk HOST:PORT[,HOST:PORT...][/chroot]` is kazoo's connect string: its servers,
tried in turn, and a chroot every path is under. Its name in lock ids, the
screen and the audit log is the string itself (ports made explicit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockwatch.sources.contract import SourceError
from lockwatch.sources.knownservers import KnownServers

if TYPE_CHECKING:
    from lockwatch.sources.contract import Wanted

DEFAULT_PORT = 2181
# The name the provider's reach goes by in `Doing.reach`.
REACH = "zk_endpoint"


@dataclass(frozen=True)
class ZkEndpoint:
    hosts: tuple[tuple[str, int], ...]
    chroot: str  # "" or "/a/b"

    @property
    def connect(self) -> str:
        """kazoo's connect string."""
        return ",".join(_host(host, port) for host, port in self.hosts) + self.chroot

    @property
    def name(self) -> str:
        return self.connect


def _host(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _one(part: str, given: str) -> tuple[str, int]:
    host, port = part, str(DEFAULT_PORT)
    if part.startswith("["):
        host, _, rest = part[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise SourceError(f"--zk {given}: {part!r} is not HOST:PORT")
            port = rest[1:]
    elif ":" in part:
        host, _, port = part.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SourceError(f"--zk {given}: {part!r} is not HOST:PORT")
    return host, int(port)


def parse(given: str) -> ZkEndpoint:
    """`HOST:PORT[,HOST:PORT...][/chroot]` as an endpoint; SourceError when it is not one."""
    text = given.strip()
    if "://" in text or "@" in text:
        raise SourceError(
            f"--zk {given}: give HOST:PORT[,HOST:PORT...][/chroot] (no scheme, no credentials:"
            " ZooKeeper digest authentication is not supported)"
        )
    hosts_part, slash, chroot = text.partition("/")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    if ":" in chroot:
        raise SourceError(f"--zk {given}: a chroot with ':' in it is not supported")
    parts = [part.strip() for part in hosts_part.split(",") if part.strip()]
    if not parts:
        raise SourceError(f"--zk {given}: no HOST:PORT in it")
    return ZkEndpoint(tuple(_one(part, given) for part in parts), chroot)


@dataclass(frozen=True)
class Reach(KnownServers[ZkEndpoint]):
    """The ensembles a run was told of, by name; any other name is its own
    connect string (a lock id carries it whole)."""

    def unknown(self, name: str) -> ZkEndpoint:
        return parse(name)


def given_strings(wanted: Wanted) -> tuple[str, ...]:
    settings = wanted.settings("zookeeper")
    given = tuple(wanted.values.get("zk_servers") or ())
    return given or (settings.servers if settings else ())


def reach_of(wanted: Wanted) -> Reach:
    known = [parse(text) for text in dict.fromkeys(given_strings(wanted))]
    return Reach({endpoint.name: endpoint for endpoint in known})


def endpoint_for(name: str, reach: Mapping[str, Any]) -> ZkEndpoint | None:
    found = reach.get(REACH) or Reach({})
    endpoint: ZkEndpoint | None = found(name)
    return endpoint
