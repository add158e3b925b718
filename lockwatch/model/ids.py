"""Lock ids: built and parsed here and nowhere else.

An id names one lock for as long as it is the same lock, across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`:

    file:<absolute path>
    pg:<user@host:port/db>:<holder>:<target>:<mode>:<held|wait>
    kernel:<major:minor>:<inode>:<TYPE>:<start>-<end|EOF>:<pid>
    remote:<serve URL>#<the lock's id on that host>
    redis:<host:port/db>[,<host:port/db>...]:<key>[#client=<id>]
    etcd:<host:port>:<key>
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FILE = "file"
PG = "pg"
KERNEL = "kernel"
REMOTE = "remote"
REDIS = "redis"
ETCD = "etcd"
# Which prefixes there are is the registry's to say (each source's `id_prefix`,
# `registry.for_id`): this module only builds and parses each kind.

# The server part of a pg id is lockwatch's display name of the server
# (user@host:port/db, never a password): see sources/postgres/dsn.display_name.
_PG = re.compile(r"pg:(?P<server>(?:[^@:/]+@)?[^:/]+:\d+/[^:]*):(?P<rest>.+)")
_KERNEL = re.compile(
    r"kernel:(?P<major>\d+):(?P<minor>\d+):(?P<inode>\d+):(?P<type>[A-Z]+)"
    r":(?P<start>\d+)-(?P<end>\d+|EOF):(?P<pid>-?\d+)"
)


# -- files ------------------------------------------------------------------------


def file_id(path: str) -> str:
    return f"{FILE}:{path}"


def file_path(lock_id: str) -> str | None:
    """The path a `file:` id names, else None."""
    return lock_id[len(FILE) + 1 :] if lock_id.startswith(FILE + ":") else None


def file_prefix(directory: str) -> str:
    """The start every id of a lock under `directory` shares."""
    return f"{FILE}:{directory.rstrip('/')}/"


# -- PostgreSQL -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PgId:
    server: str  # user@host:port/db
    rest: str  # holder:target:mode:state


def pg_id(server: str, holder: int | str, target: str, mode: str, state: str) -> str:
    """`state` is `held` or `wait`; `holder` a backend pid or a prepared xact."""
    return f"{PG}:{server}:{holder}:{target}:{mode}:{state}"


def parse_pg(lock_id: str) -> PgId | None:
    match = _PG.fullmatch(lock_id)
    return None if match is None else PgId(match["server"], match["rest"])


def pg_server(lock_id: str) -> str | None:
    """The server of a pg id, even of one too mangled to parse whole."""
    parsed = parse_pg(lock_id)
    if parsed is not None:
        return parsed.server
    parts = lock_id[len(PG) + 1 :].split(":", 2)
    return ":".join(parts[:2]) if lock_id.startswith(PG + ":") and len(parts) >= 2 else None


# -- kernel -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KernelId:
    device: str  # "major:minor", decimal
    inode: int
    type: str  # FLOCK, POSIX, OFDLCK
    start: int
    end: int | None  # None: to the end of the file
    pid: int


def kernel_id(device: str, inode: int, type: str, start: int, end: int | None, pid: int) -> str:
    return f"{KERNEL}:{device}:{inode}:{type}:{start}-{'EOF' if end is None else end}:{pid}"


def parse_kernel(lock_id: str) -> KernelId | None:
    match = _KERNEL.fullmatch(lock_id)
    if match is None:
        return None
    end = match["end"]
    return KernelId(
        f"{int(match['major'])}:{int(match['minor'])}",
        int(match["inode"]),
        match["type"],
        int(match["start"]),
        None if end == "EOF" else int(end),
        int(match["pid"]),
    )


# -- Redis and etcd -----------------------------------------------------------------

# A Redis server is `host:port/db` (`[v6]:port/db`, or `unix:<socket path>/db`);
# a Redlock group is its servers joined by commas.
_REDIS_SERVER = r"(?:\[[0-9A-Fa-f:.]+\]|[^:/,\[\]]+):\d+/\d+|unix:/[^:,]*/\d+"
_REDIS = re.compile(rf"redis:(?P<server>(?:{_REDIS_SERVER})(?:,(?:{_REDIS_SERVER}))*):(?P<key>.*)")
_ETCD = re.compile(r"etcd:(?P<server>(?:\[[0-9A-Fa-f:.]+\]|[^:/\[\]]+):\d+):(?P<key>.*)")


@dataclass(frozen=True, slots=True)
class StoreId:
    server: str  # a server's (or a Redlock group's) display name
    key: str  # the key, and for a Redis waiter `#client=<id>` after it


def redis_id(server: str, key: str, client: int | None = None) -> str:
    """`client`: a client waiting for the lock at `key`, not the lock itself."""
    return f"{REDIS}:{server}:{key}" + ("" if client is None else f"#client={client}")


def parse_redis(lock_id: str) -> StoreId | None:
    match = _REDIS.fullmatch(lock_id)
    return None if match is None else StoreId(match["server"], match["key"])


def etcd_id(server: str, key: str) -> str:
    return f"{ETCD}:{server}:{key}"


def parse_etcd(lock_id: str) -> StoreId | None:
    match = _ETCD.fullmatch(lock_id)
    return None if match is None else StoreId(match["server"], match["key"])


# -- another host's locks, through its `lockwatch serve` ------------------------------


def remote_id(remote: str, lock_id: str) -> str:
    """A lock of the serve at `remote` (a URL without fragment): its id there,
    after a `#`, which no such URL contains."""
    return f"{REMOTE}:{remote}#{lock_id}"


def parse_remote(lock_id: str) -> tuple[str, str] | None:
    """(the serve's URL, the lock's id there) of a `remote:` id, else None."""
    if not lock_id.startswith(REMOTE + ":"):
        return None
    remote, sep, inner = lock_id[len(REMOTE) + 1 :].partition("#")
    return (remote, inner) if sep and remote and inner else None
