"""The kernel's locks as they are now: /proc/locks read and made lock records,
and the source's status from that reading (for `ls`, the feed and actions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lockwatch.model.status import SourceStatus

if TYPE_CHECKING:
    from datetime import datetime

    from lockwatch.model.lock import Lock
    from lockwatch.sources.procfs import KernelTable

STATUS_NAME = "/proc/locks"


def status(table: KernelTable, at: datetime) -> SourceStatus:
    if not table.readable:
        return SourceStatus("kernel", STATUS_NAME, "error", reason=table.problem)
    return SourceStatus("kernel", STATUS_NAME, "ok", reason=table.problem, updated_at=at)


def locks_now(
    roots: Sequence[str], *, joined: Sequence[str] = (), live: bool = False
) -> tuple[KernelTable, list[Lock]]:
    """/proc/locks read now, as lock records; files no holder's fds name are
    looked for by inode under `roots`. With `roots`, only the locks on files
    under them; `joined`: where the file source lists files too, and the locks
    a file's row there carries are not listed again (joined.py); `live`: for a
    feed, beside the files feed (joined.py says which files it lists at once)."""
    from lockwatch.sources.kernel.joined import joined as without_joined
    from lockwatch.sources.kernel.narrow import narrowed
    from lockwatch.sources.kernel.records import known_files, to_locks
    from lockwatch.sources.procfs import read_table

    table = read_table()
    unplaced = {lock.file for lock in table.locks if lock.path is None}
    known = known_files(roots, unplaced) if unplaced and roots else {}
    # With PATHs, only the locks on files under them (narrow.py).
    locks = narrowed(to_locks(table, known), roots)
    return table, without_joined(locks, joined, live=live) if joined else locks
