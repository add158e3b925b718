"""Redis lock ids, built and parsed here and nowhere else:

    redis:<host:port/db>[,<host:port/db>...]:<key>[#client=<id>]
    redis:<host:port/db>:<key>#holder=<member>      one holder of a semaphore
    redis:<host:port/db>:<key>#waiter=<uuid:thread> a Redisson fair lock's queued waiter
    redis:<host:port/db>:<channel>#pubsub=<id>      a subscription lock's connection

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the redis source's `id_prefix` (the registry's vocabulary of prefixes).

A key is any bytes: in an id a byte that is not UTF-8 is written `\xff`, and a
backslash that would read as the start of such an escape (one before `xHH`,
another backslash or an escaped byte) is doubled, so two keys never share an id
(`lock:a\xff` with a real byte and with the four characters) while every other
key's id is the key as it is.
"""

from __future__ import annotations

import re

from lockwatch.model.lazyre import lazy_compile
from lockwatch.sources.stores.ids import StoreId

REDIS = "redis"

# A Redis server is `host:port/db` (`[v6]:port/db`, or `unix:<socket path>/db`);
# a Redlock group is its servers joined by commas.
_REDIS_SERVER = r"(?:\[[0-9A-Fa-f:.]+\]|[^:/,\[\]]+):\d+/\d+|unix:/[^:,]*/\d+"
_REDIS = lazy_compile(
    rf"redis:(?P<server>(?:{_REDIS_SERVER})(?:,(?:{_REDIS_SERVER}))*):(?P<key>.*)"
)


# What follows a key in an id that names one party of it, not the key's lock.
_PARTY = lazy_compile(r"#(?:client|holder|waiter|pubsub)=[^#]*\Z")


# In an id: an escaped backslash, or a byte that was not UTF-8.
_ESCAPE = lazy_compile(r"\\\\|\\x([0-9A-Fa-f]{2})")
_HEX = frozenset("0123456789abcdefABCDEF")


def _needs_doubling(key: str, at: int) -> bool:
    """Whether the backslash at `at` would read as part of an escape left as it is."""
    rest = key[at + 1 : at + 4]
    if not rest:
        return False
    if rest[0] == "\\" or "\udc80" <= rest[0] <= "\udcff":
        return True
    return len(rest) == 3 and rest[0] == "x" and rest[1] in _HEX and rest[2] in _HEX


def key_text(key: str) -> str:
    """A key (surrogateescape text: the server's bytes) as an id spells it."""
    if "\\" not in key and not any("\udc80" <= char <= "\udcff" for char in key):
        return key
    out: list[str] = []
    for at, char in enumerate(key):
        if "\udc80" <= char <= "\udcff":
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif char == "\\" and _needs_doubling(key, at):
            out.append("\\\\")
        else:
            out.append(char)
    return "".join(out)


def key_bytes_text(spelled: str) -> str:
    """An id's key back as the server's bytes (surrogateescape text): `key_text`'s inverse."""

    def one(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return "\\"
        value = int(match.group(1), 16)
        # Only bytes that are not UTF-8 are escaped: `\x41` spells no byte of its own.
        return chr(0xDC00 + value) if value >= 0x80 else match.group(0)

    return _ESCAPE.sub(one, spelled)


def redis_id(
    server: str,
    key: str,
    client: int | None = None,
    *,
    holder: str | None = None,
    waiter: str | None = None,
    pubsub: int | None = None,
) -> str:
    """`client`: a client waiting for the lock at `key`, not the lock itself;
    `holder`: one holder (a sorted set's member) of the semaphore at `key`;
    `waiter`: a waiter queued for the Redisson fair lock at `key`;
    `pubsub`: the connection holding the subscription lock on channel `key`."""
    base = f"{REDIS}:{server}:{key_text(key)}"
    if client is not None:
        return f"{base}#client={client}"
    if holder is not None:
        return f"{base}#holder={key_text(holder)}"
    if waiter is not None:
        return f"{base}#waiter={key_text(waiter)}"
    if pubsub is not None:
        return f"{base}#pubsub={pubsub}"
    return base


def key_of(key: str) -> tuple[str, str | None]:
    """A parsed id's key without its party, and the party's kind (`client`,
    `holder`, `waiter`, `pubsub`) if it names one."""
    match = _PARTY.search(key)
    if match is None:
        return key, None
    return key[: match.start()], match.group(0)[1:].partition("=")[0]


def canonical(lock_id: str) -> str:
    """An id as lockwatch spells it (`\\xFF` typed as `\\xff`; a raw byte escaped)."""
    parsed = parse_redis(lock_id)
    return lock_id if parsed is None else f"{REDIS}:{parsed.server}:{key_text(parsed.key)}"


def parse_redis(lock_id: str) -> StoreId | None:
    """An id's server and key, the key as the server's bytes (surrogateescape text)."""
    match = _REDIS.fullmatch(lock_id)
    return None if match is None else StoreId(match["server"], key_bytes_text(match["key"]))


# Bytes redis-cli reads as themselves in a single-quoted argument.
_PLAIN = frozenset(range(0x20, 0x7F)) - {ord("'"), ord("\\")}


def cli_arg(text: str) -> str:
    """A key or value (surrogateescape text: the server's bytes) as one redis-cli
    argument that gives those bytes back: single-quoted where plain, else
    double-quoted with `\\xHH` for every other byte (Python's repr spelled a byte
    as `\\udcff`, which redis-cli takes as six characters: a restore made
    another key)."""
    data = text.encode("utf-8", "surrogateescape")
    if all(byte in _PLAIN for byte in data):
        return f"'{text}'"
    out = []
    for byte in data:
        if byte in (ord('"'), ord("\\")):
            out.append(f"\\{chr(byte)}")
        elif 0x20 <= byte < 0x7F:
            out.append(chr(byte))
        else:
            out.append(f"\\x{byte:02x}")
    return '"' + "".join(out) + '"'
