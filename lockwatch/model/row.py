"""A row of a result set, kept compact: the column names shared by every row of
one result, the values in one tuple. A Postgres lock keeps its pg_locks row to
show it and to act on it; as a dict, the query's 25 columns cost about 1.2 KB of
slots a row (60 MB at 50,000 locks, twice over while a poll is judged), as a
`Row` about 260 bytes.

Read-only and a `Mapping`: code that reads a row by name works unchanged. JSON
encoders want a dict: `plain` gives one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any


class Columns:
    """The column names of one result set, shared by its rows."""

    __slots__ = ("index", "names")

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.index = {name: i for i, name in enumerate(self.names)}
        if len(self.index) != len(self.names):
            raise ValueError(f"a column name is repeated: {self.names!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Columns, (self.names,))

    def __repr__(self) -> str:
        return f"Columns({self.names!r})"


class Row(Mapping[str, Any]):
    """One row: `columns` (shared) and its `values`, in the columns' order."""

    __slots__ = ("_columns", "_values")

    def __init__(self, columns: Columns, values: Sequence[Any]) -> None:
        values = tuple(values)
        if len(values) != len(columns.names):
            raise ValueError(f"{len(values)} values for {len(columns.names)} columns")
        self._columns = columns
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[self._columns.index[key]]

    def get(self, key: str, default: Any = None) -> Any:
        i = self._columns.index.get(key)
        return default if i is None else self._values[i]

    def __contains__(self, key: object) -> bool:
        return key in self._columns.index

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns.names)

    def __len__(self) -> int:
        return len(self._values)

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(self._columns.names, self._values, strict=True))

    def __repr__(self) -> str:
        return repr(self.as_dict())

    def __reduce__(self) -> tuple[Any, ...]:
        return (Row, (self._columns, self._values))


def plain(value: Any) -> Any:
    """`value` as a JSON encoder takes it: a `Row` as the dict it stands for."""
    return value.as_dict() if isinstance(value, Row) else value
