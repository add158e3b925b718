"""A record's JSON from a declared table of its fields.

Many `as_json` methods only spell out their own attributes, key by key; such a
class declares the table instead (`as_json = json_fields(...)`) and one reader
builds the dict. The table's order is the JSON's key order (docs/json.md: the
output keeps it).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

__all__ = ["json_fields"]

# A key that is its attribute's name, or (key, attribute) where the attribute may
# be dotted (`"file.device"` reads through a member), or (key, function of the
# object) for a value worked out from it.
Entry = str | tuple[str, str | Callable[[Any], object]]


def json_fields(*table: Entry) -> Callable[[Any], dict[str, object]]:
    """The function of an object that `table` describes: as a class attribute,
    `as_json = json_fields("kind", ("status", "state"))` gives instances an
    `as_json()` returning `{"kind": self.kind, "status": self.state}`."""
    pairs = [(entry, entry) if isinstance(entry, str) else entry for entry in table]
    keys = tuple(key for key, _ in pairs)
    names = [how for _, how in pairs if isinstance(how, str)]
    if len(names) == len(pairs) > 1:
        # All plain attributes, the common case and the one built per lock (kernel
        # locks on `ls --json`): one attrgetter reads them all in C, and the reader
        # is a plain function, no frame of a __call__ between. Not strict: the
        # lengths are equal by construction, and the check costs on every call.
        read = operator.attrgetter(*names)
        return lambda obj: dict(zip(keys, read(obj), strict=False))
    getters = tuple(operator.attrgetter(how) if isinstance(how, str) else how for _, how in pairs)
    return lambda obj: {key: get(obj) for key, get in zip(keys, getters, strict=True)}
