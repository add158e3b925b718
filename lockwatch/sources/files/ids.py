"""File lock ids, built and parsed here and nowhere else: `file:<absolute path>`.

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the files source's `id_prefix` (the registry's vocabulary of prefixes).
"""

from __future__ import annotations

FILE = "file"


def file_id(path: str) -> str:
    return f"{FILE}:{path}"


def file_path(lock_id: str) -> str | None:
    """The path a `file:` id names, else None."""
    return lock_id[len(FILE) + 1 :] if lock_id.startswith(FILE + ":") else None


def file_prefix(directory: str) -> str:
    """The start every id of a lock under `directory` shares."""
    return f"{FILE}:{directory.rstrip('/')}/"
