"""Where an etcd server is and what to call it: `host:port` in lock ids, the
JSON, the screen and the audit log.

An action reconnects to a server with the URL the run was told of it by
(https, a path in front of the gateway): the provider's `reach` (`Reach`) hands
those on, by name, to the CLI's commands and the dashboard alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lockwatch.sources.contract import SourceError
from lockwatch.sources.knownservers import KnownServers
from lockwatch.sources.urls import host_port, scrub

if TYPE_CHECKING:
    from lockwatch.sources.contract import Wanted

DEFAULT_PORT = 2379


@dataclass(frozen=True)
class EtcdEndpoint:
    url: str = field(repr=False)  # as given (never shown: it could carry credentials)
    name: str  # host:port
    base: str  # scheme://host:port[/path], where the JSON gateway is

    def scrub(self, text: str) -> str:
        return scrub(text)


def parse(url: str) -> EtcdEndpoint:
    """`url` (http:// or https://) as an endpoint; SourceError when it cannot be one."""
    shown = scrub(url)
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port
    except ValueError as exc:
        raise SourceError(f"--etcd {shown}: not a usable URL ({scrub(str(exc))})") from None
    if parts.scheme not in ("http", "https"):
        raise SourceError(f"--etcd {shown}: the URL must start with http:// or https://")
    if not parts.hostname:
        raise SourceError(f"--etcd {shown}: no host in the URL")
    if parts.username or parts.password:
        raise SourceError(
            f"--etcd {shown}: etcd user authentication is not supported; give a URL without"
            " credentials (a read-only proxy, or client certificates in front of the gateway)"
        )
    where = host_port(parts.hostname, port or DEFAULT_PORT)
    base = f"{parts.scheme}://{where}{parts.path.rstrip('/')}"
    return EtcdEndpoint(url, where, base)


# The name the provider's reach goes by in `Doing.reach`.
REACH = "etcd_endpoint"


@dataclass(frozen=True)
class Reach(KnownServers[EtcdEndpoint]):
    """The servers a run was told of (flags, config), by name; any other name is
    reached over plain http."""

    def unknown(self, name: str) -> EtcdEndpoint:
        return parse(f"http://{name}")


def reach_of(wanted: Wanted) -> Reach:
    """How actions reach the servers `wanted` names (--etcd, else the config's),
    with the URLs they were named by (the provider's reach)."""
    settings = wanted.settings("etcd")
    urls = tuple(wanted.values.get("etcd_urls") or ()) or (settings.urls if settings else ())
    known = [parse(url) for url in dict.fromkeys(urls)]
    return Reach({endpoint.name: endpoint for endpoint in known})


def endpoint_for(name: str, reach: Mapping[str, Any]) -> EtcdEndpoint | None:
    """The server `name` stands for, as the run's reach has it (none handed on:
    plain http to the name)."""
    found = reach.get(REACH) or Reach({})
    endpoint: EtcdEndpoint | None = found(name)
    return endpoint
