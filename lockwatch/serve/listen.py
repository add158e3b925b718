"""Where `lockwatch serve` listens: `HOST:PORT`, `[v6]:PORT`, and whether that
address is loopback only (nobody but this host can connect) or not (a token is
required)."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass


class ListenError(ValueError):
    """Not a listen address; the message says why."""


@dataclass(frozen=True)
class Listen:
    host: str  # an address or a name; "0.0.0.0" / "::" for every interface
    port: int  # 0: any free port (the kernel picks one)

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}"


def parse_listen(text: str) -> Listen:
    raw = text.strip()
    if raw.startswith("["):
        host, sep, rest = raw[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ListenError(f"{text!r}: write an IPv6 address as [ADDRESS]:PORT")
        port_text = rest[1:]
    else:
        host, sep, port_text = raw.rpartition(":")
        if not sep:
            raise ListenError(f"{text!r}: give HOST:PORT (e.g. 127.0.0.1:9464)")
        if ":" in host:
            raise ListenError(f"{text!r}: write an IPv6 address in brackets: [{host}]:{port_text}")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ListenError(f"{text!r}: the port must be a number from 0 to 65535")
    if host in ("", "*"):
        host = "0.0.0.0"
    return Listen(host, int(port_text))


def addresses(host: str) -> list[str]:
    """The addresses `host` stands for (a name is resolved)."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ListenError(f"cannot resolve {host!r}: {exc}") from None
    return sorted({str(info[4][0]) for info in found})


def loopback_only(host: str) -> bool:
    """Whether only this host can reach `host`: every address it stands for is loopback."""
    found = addresses(host)
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)


def family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in addresses(host)[0] else socket.AF_INET
