"""Whether a host name or address can only mean the machine it is read on.

Pure. Shared by the rules that compare a recorded host with this one (a lock
file's holder, a remote's claim about itself) and by sources that ask whether a
client is on their server's own host.
"""

from __future__ import annotations

import ipaddress

from lockwatch.model.lazyre import lazy_compile

# Names every resolver maps to loopback (Debian's /etc/hosts adds the ip6- ones).
_LOCAL_NAMES = frozenset({"localhost", "ip6-localhost", "ip6-loopback"})
# `[::1]:9464`, `127.0.0.1:9464`: an address with a port, as a URL's authority has it.
_WITH_PORT = lazy_compile(r"\[(?P<v6>[^\]]+)\](?::\d*)?|(?P<v4>[0-9.]+):\d*")


def is_local_address(host: str) -> bool:
    """`localhost` (and `localhost.<domain>`), a loopback address (127/8, ::1, an
    IPv4-mapped loopback) or the unspecified address, with or without brackets
    and a port: words that name no other host, whoever says them."""
    text = host.strip().lower().rstrip(".")
    if text in _LOCAL_NAMES or text.startswith("localhost."):
        return True
    bare = _WITH_PORT.fullmatch(text)
    if bare is not None:
        text = bare["v6"] or bare["v4"]
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    return address.is_loopback or address.is_unspecified
