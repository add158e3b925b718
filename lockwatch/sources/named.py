"""Whether a file walk lists a file by its name (a lock name, or one a known
format gives its locks): asked by the kernel source (kernel/joined.py), whose
live feed leaves a kernel lock to the file's row only where the files feed
lists that file at once. Answered by the file source, which says how here when
it loads (sources/files/plugin.py: the registry loads it at every start), so
neither source imports the other.
"""

from __future__ import annotations

from collections.abc import Callable

_lists: Callable[[str], bool] | None = None


def answered_by(lists: Callable[[str], bool]) -> None:
    """`lists(path)` answers from now on (the file source's walk)."""
    global _lists
    _lists = lists


def listed_by_name(path: str) -> bool:
    """Whether a walk lists the regular file at `path` by its name; False with
    no file source loaded (nothing lists it)."""
    return _lists is not None and _lists(path)
