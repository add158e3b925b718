"""Ids of another host's locks, seen through its `lockwatch serve`, built and
parsed here and nowhere else: `remote:<serve URL>#<the lock's id on that host>`.

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the remote source's `id_prefix` (the registry's vocabulary of prefixes).
"""

from __future__ import annotations

REMOTE = "remote"


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
