"""PostgreSQL lock ids, built and parsed here and nowhere else:

    pg:<user@host:port/db>:<holder>:<target>:<mode>:<held|wait>

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the postgres source's `id_prefix` (the registry's vocabulary of prefixes).
"""

from __future__ import annotations

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.slots import lean_dataclass

PG = "pg"

# The server part of a pg id is lockwatch's display name of the server
# (user@host:port/db, never a password): see sources/postgres/dsn.display_name.
_PG = lazy_compile(r"pg:(?P<server>(?:[^@:/]+@)?[^:/]+:\d+/[^:]*):(?P<rest>.+)")


@lean_dataclass(frozen=True, slots=True)
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
