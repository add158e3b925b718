"""A record's JSON from a declared table of its fields.

Many `as_json` methods only spell out their own attributes, key by key; each
such class declares the table instead and one reader builds the dict. The
table's order is the JSON's key order (docs/json.md: the output keeps it).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

__all__ = ["JsonFields"]

# A key that is its attribute's name, or (key, attribute) where the attribute may
# be dotted (`"file.device"` reads through a member), or (key, function of the
# object) for a value worked out from it.
Entry = str | tuple[str, str | Callable[[Any], object]]


class JsonFields:
    """`JsonFields("kind", ("status", "state"))(obj)` is
    `{"kind": obj.kind, "status": obj.state}`."""

    __slots__ = ("_read", "keys")

    def __init__(self, *table: Entry) -> None:
        pairs = [(entry, entry) if isinstance(entry, str) else entry for entry in table]
        self.keys = tuple(key for key, _ in pairs)
        names = [how for _, how in pairs if isinstance(how, str)]
        self._read: Callable[[Any], tuple[object, ...]]
        if len(names) == len(pairs) > 1:
            # All plain attributes: one attrgetter reads them all in C, the
            # common case and the one records are built with per lock.
            self._read = operator.attrgetter(*names)
        else:
            getters = tuple(
                operator.attrgetter(how) if isinstance(how, str) else how for _, how in pairs
            )
            self._read = lambda obj: tuple([get(obj) for get in getters])

    def __call__(self, obj: object) -> dict[str, object]:
        return dict(zip(self.keys, self._read(obj), strict=True))
