"""Values the board keeps for every lock, kept compact: a Postgres lock's
pg_locks row (`Row`) and a lock file's JSON record (`Document`). Both are read
rarely (the detail pane, an action, a recording) and kept for every lock, so a
large board pays for their form many times over:

- a row as a dict costs about 1.2 KB of slots for the query's 25 columns (60 MB
  at 50,000 locks, twice over while a poll is judged); as a `Row`, the column
  names are shared by every row of one result and the values are one tuple:
  about 260 bytes;
- a record decoded costs 2-5x its bytes (a dict, a str or int per value: 420 B
  on average for the scan benchmark's 183-byte records); as a `Document` it is
  those bytes, decoded again each time it is read.

Both are read-only `Mapping`s, so code that reads them by key works unchanged.
JSON encoders want plain values: `plain` gives them.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from typing import Any

import orjson


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


class Document(Mapping[str, Any]):
    """A JSON object kept as the bytes it was read from: `raw` must be the text of
    a JSON object (what `orjson.loads` read as a dict), as the file source checks.
    Each read decodes it again (a few microseconds: reads are rare)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes) -> None:
        self._raw = raw

    def as_dict(self) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self._raw)
        return value

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_dict().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.as_dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())

    # Each of these decodes once (Mapping's own would decode once per key).
    def keys(self) -> KeysView[str]:
        return self.as_dict().keys()

    def items(self) -> ItemsView[str, Any]:
        return self.as_dict().items()

    def values(self) -> ValuesView[Any]:
        return self.as_dict().values()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return self.as_dict() == dict(other.items())

    def __repr__(self) -> str:
        return repr(self.as_dict())

    def __reduce__(self) -> tuple[Any, ...]:
        return (Document, (self._raw,))


def plain(value: Any) -> Any:
    """`value` as a JSON encoder takes it: a `Row` or a `Document` as the dict it
    stands for, anything else as it is."""
    return value.as_dict() if isinstance(value, (Row, Document)) else value
