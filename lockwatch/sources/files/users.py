"""Who works on what a lock guards, for lock files that name no holder but
whose writer is known by its work: a `.git/*.lock` is held while a git process
works in that repository (`Lock.users`, read by `held_while_used` policies).

Not written yet: attaches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from lockwatch.model.lock import Lock


def attach_users(locks: Sequence[Lock]) -> list[Lock]:
    """`locks` with `users` filled in for those whose policy is held_while_used."""
    return list(locks)
