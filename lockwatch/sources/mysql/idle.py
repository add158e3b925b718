"""Which threads sit idle in an open transaction past the idle limit: their
client processes are looked for (server.py), and each that is stale stays
listed whether or not anyone waits on it (records.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def idle_in_transaction(
    processes: Sequence[Sequence[Any]], trx: Sequence[Sequence[Any]] | None, idle_after: float
) -> set[int]:
    """The threads idle (Sleep) in an open transaction for longer than `idle_after`."""
    open_trx = {int(row[0]) for row in trx or () if row[0]}
    return {
        int(row[0])
        for row in processes
        if row[4] == "Sleep"
        and row[5] is not None
        and float(row[5]) > idle_after * 1000
        and int(row[0]) in open_trx
    }
