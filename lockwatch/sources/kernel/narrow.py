"""Kernel locks narrowed to the PATHs named: with PATHs, only the locks on
files under them (without, every lock on the host). A lock whose file has no
path now (deleted, or its holders' fds unreadable and not found by inode under
the PATHs) is under none of them."""

from __future__ import annotations

import os
from collections.abc import Sequence

from lockwatch.model.lock import Lock


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def narrowed(locks: Sequence[Lock], roots: Sequence[str]) -> list[Lock]:
    """`locks` as kernel rows for `roots` (all of them when none is named).
    Kernel paths are real paths (/proc/<pid>/fd): so are the roots compared."""
    if not roots:
        return list(locks)
    real = [os.path.realpath(root) for root in roots]
    return [lock for lock in locks if lock.path is not None and _under(lock.path, real)]
