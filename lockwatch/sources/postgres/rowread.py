"""Reading pg_locks rows fast for to_locks, and the entries of a listing it fills."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any, NamedTuple

from lockwatch.model.compact import Row as CompactRow
from lockwatch.sources.postgres.facts import AdvisoryKey

Row = Mapping[str, Any]

# What to_locks reads of every row, in one call per row: a poll's rows are
# thousands, and a `Row` read key by key is a Python call per key.
_PER_ROW = (
    "pid", "target", "granted", "locktype", "mode", "classid", "objid", "objsubid",
    "wait_age", "database_name", "terraform_state",
)  # fmt: skip
_by_name = itemgetter(*_PER_ROW)


def row_reader() -> Callable[[Row], tuple[Any, ...]]:
    """A reader of `_PER_ROW` from a row: by position from a compact `Row`'s
    values (its columns shared by its result's rows), else key by key; a column
    the result lacks reads as NULL."""
    columns: Any = None
    by_position: Callable[[Any], tuple[Any, ...]] = _by_name

    def lenient(row: Row) -> tuple[Any, ...]:
        return tuple(row.get(name) for name in _PER_ROW)

    def read(row: Row) -> tuple[Any, ...]:
        nonlocal columns, by_position
        if type(row) is not CompactRow:
            try:
                return _by_name(row)  # type: ignore[no-any-return]
            except KeyError:
                return lenient(row)
        if row._columns is not columns:
            index = row._columns.index
            if not all(name in index for name in _PER_ROW):
                return lenient(row)
            columns = row._columns
            by_position = itemgetter(*(index[name] for name in _PER_ROW))
        return by_position(row._values)

    return read


class Follower(NamedTuple):
    """A lock of a listing that is an earlier one's (`leader`, an index into
    to_locks' answer) but for these: its record is the leader's with them."""

    leader: int
    id: str
    name: str
    mode: str
    database: str | None
    advisory_key: AdvisoryKey | None


Entry = int | Follower
