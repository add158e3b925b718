"""Where an etcd server is and what to call it: `host:port` in lock ids, the
JSON, the screen and the audit log.

Servers this process was told about (flags, config) are remembered by name, so
an action on a lock reconnects with the URL it was listed with (https, a
path in front of the gateway).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from lockwatch.sources.contract import SourceError
from lockwatch.sources.urls import host_port, scrub

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


_KNOWN: dict[str, EtcdEndpoint] = {}
_KNOWN_LOCK = threading.Lock()


def remember(endpoints: tuple[EtcdEndpoint, ...] | list[EtcdEndpoint]) -> None:
    with _KNOWN_LOCK:
        for endpoint in endpoints:
            _KNOWN[endpoint.name] = endpoint


def endpoint_for(name: str) -> EtcdEndpoint | None:
    """The server `name` stands for: as this run was told of it, else plain http."""
    with _KNOWN_LOCK:
        known = _KNOWN.get(name)
    if known is not None:
        return known
    try:
        return parse(f"http://{name}")
    except SourceError:
        return None
