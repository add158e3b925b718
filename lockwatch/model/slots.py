"""A faster `__init__` for the frozen, slotted dataclasses made once per lock.

A frozen dataclass sets each field in `__init__` through
`object.__setattr__(self, name, value)`: a global, an attribute and a call per
field, which for `Lock` (26 fields) is most of what building one costs. A scan
builds several per lock file (decoded, its record kept as read, the kernel's
word added), and the dashboard rebuilds each one it receives from the scan's
workers. `fast_init` gives such a class an `__init__` that sets each slot
through the slot's own descriptor instead: the same signature, defaults and
result, in half the time; the class stays frozen (its `__setattr__` still
refuses).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def fast_init(cls: type[T]) -> type[T]:
    """`cls` (a frozen, slotted dataclass whose fields all go to `__init__`,
    with plain defaults) with the faster `__init__`."""
    params = getattr(cls, "__dataclass_params__", None)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: not a frozen, slotted dataclass")
    if hasattr(cls, "__post_init__") or any(
        not f.init or f.kw_only or f.default_factory is not _MISSING for f in fields
    ):
        raise TypeError(f"{cls.__name__}: only plain fields with plain defaults")
    namespace: dict[str, Any] = {}
    arguments = []
    lines = []
    for index, f in enumerate(fields):
        if f.default is _MISSING:
            arguments.append(f.name)
        else:
            namespace[f"_default_{index}"] = f.default
            arguments.append(f"{f.name}=_default_{index}")
        namespace[f"_set_{index}"] = getattr(cls, f.name).__set__
        lines.append(f"    _set_{index}(self, {f.name})")
    source = f"def __init__(self, {', '.join(arguments)}):\n" + "\n".join(lines) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
