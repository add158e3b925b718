"""A faster `__init__` for the frozen, slotted dataclasses made once per lock.

A frozen dataclass sets each field in `__init__` through
`object.__setattr__(self, name, value)`: a global, an attribute and a call per
field, which for `Lock` (16 fields) is most of what building one costs. A scan
builds several per lock file (decoded, its record kept as read, the kernel's
word added), and the dashboard rebuilds each one it receives from the scan's
workers. `fast_init` gives such a class an `__init__` with the same signature,
defaults and result, in half the time or less; the class stays frozen (its
`__setattr__` still refuses).

How: calling a slot's descriptor still costs an argument tuple and a C wrapper
per field (~400 instructions; a scan made ~70 such calls per lock file). So the
new instance is first switched to an open twin of its class (the same slots,
no subclass fields, `object.__setattr__`), where `self.x = x` is Python's
specialised slot store (a dozen instructions), and switched back to its class
before anyone else sees it. The two switches cost about what three descriptor
calls do: classes of fewer fields, and subclasses (whose layout the twin does
not share), set each slot through its descriptor.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["fast_init", "lean_dataclass"]

T = TypeVar("T")

_MISSING = dataclasses.MISSING
_INITVAR = getattr(dataclasses, "_FIELD_INITVAR", None)


def fast_init(cls: type[T]) -> type[T]:
    """`cls` (a frozen, slotted dataclass whose fields go to `__init__` with plain
    defaults, but for fields its `__post_init__` derives: `init=False`, no
    default) with the faster `__init__`, which calls `__post_init__` last as
    dataclass's does."""
    params = getattr(cls, "__dataclass_params__", None)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: not a frozen, slotted dataclass")
    post_init = hasattr(cls, "__post_init__")
    # An InitVar (handed to __post_init__) is no field: dataclasses.fields() omits it.
    declared = getattr(cls, "__dataclass_fields__", {}).values()
    if any(getattr(f, "_field_type", None) is _INITVAR for f in declared) or any(
        f.kw_only
        or f.default_factory is not _MISSING
        or (not f.init and (f.default is not _MISSING or not post_init))
        for f in fields
    ):
        raise TypeError(f"{cls.__name__}: only plain fields with plain defaults")
    namespace: dict[str, Any] = {}
    arguments = []
    by_descriptor = []
    by_store = []
    for index, f in enumerate(fields):
        if not f.init:
            continue  # derived by __post_init__
        if f.default is _MISSING:
            arguments.append(f.name)
        else:
            namespace[f"_default_{index}"] = f.default
            arguments.append(f"{f.name}=_default_{index}")
        namespace[f"_set_{index}"] = getattr(cls, f.name).__set__
        by_descriptor.append(f"_set_{index}(self, {f.name})")
        by_store.append(f"self.{f.name} = {f.name}")
    lines = [f"    {line}" for line in by_descriptor]
    if len(by_store) >= _STORES_WORTH_A_SWITCH:
        lines = [
            "    if type(self) is _cls:",
            "        _unfreeze(self, _open)",
            *(f"        {line}" for line in by_store),
            "        self.__class__ = _cls",
            "    else:",
            *(f"    {line}" for line in lines),
        ]
        namespace.update(_cls=cls, _open=_open_twin(cls), _unfreeze=_SET_CLASS)
    if post_init:
        lines.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(arguments)}):\n" + "\n".join(lines) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


# With fewer fields than this, switching an instance to its open twin and back
# costs more than setting each field through its descriptor.
_STORES_WORTH_A_SWITCH = 4
# `__class__`'s own setter: the frozen class's `__setattr__` would refuse, and
# `object.__setattr__` makes a bound wrapper and looks the name up at each call.
_SET_CLASS = object.__dict__["__class__"].__set__


def _open_twin(cls: type[T]) -> type[T]:
    """A subclass of `cls` with no slots of its own (the same layout, so an
    instance may switch between the two) whose attributes are plain to set."""
    namespace = {
        "__slots__": (),
        "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__,
        "__qualname__": f"{cls.__qualname__}.<open while built>",
        "__module__": cls.__module__,
    }
    return type(cls.__name__, (cls,), namespace)


# -- lean_dataclass: a dataclass with fewer methods compiled at import --------------


def _record(cls: type[T], options: dict[str, Any]) -> type[T]:
    for name in ("__repr__", "__eq__", "__hash__"):
        if name in cls.__dict__:
            raise TypeError(f"{cls.__name__}: defines {name}; use dataclass")
    if options.get("frozen") and _COMPILED_ONE_BY_ONE:
        made: type[T] = _frozen(cls, options)
    else:
        made = dataclasses.dataclass(cls, repr=False, eq=False, **options)
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    compared = _getter([f.name for f in fields if f.compare])
    shown = [f.name for f in fields if f.repr]
    shown_values = _getter(shown)
    qualname = made.__qualname__

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        values = ", ".join(
            f"{name}={value!r}" for name, value in zip(shown, shown_values(self), strict=True)
        )
        return f"{self.__class__.__qualname__}({values})"

    methods: dict[str, Any] = {"__eq__": __eq__, "__repr__": __repr__}
    if options.get("frozen"):
        hashed = _getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])

        def __hash__(self: Any) -> int:
            return hash(hashed(self))

        methods["__hash__"] = __hash__
    else:
        methods["__hash__"] = None  # as dataclass's eq without frozen: unhashable
    for name, method in methods.items():
        if method is not None:
            method.__qualname__ = f"{qualname}.{name}"
        setattr(made, name, method)
    return made


# Python 3.11 and 3.12 compile a frozen class's `__setattr__` and `__delattr__`
# from source, each in an exec of its own (dataclasses._frozen_get_del_attr):
# a third of what making a frozen class costs, ~90 execs at `ls`'s start. 3.13
# compiles all of a class's methods in one exec, with another signature: left
# alone there.
_FROZEN_METHODS = "_frozen_get_del_attr"
_COMPILED_ONE_BY_ONE = sys.version_info < (3, 13) and hasattr(dataclasses, _FROZEN_METHODS)


def _frozen(cls: type[T], options: dict[str, Any]) -> type[T]:
    """`dataclass(cls, frozen=True, ...)` with the two methods as closures: the
    same code as the source dataclasses compiles, the same class, field names
    and errors. dataclasses' own maker is put back at once; a plain dataclass
    made by another thread meanwhile gets the same methods, made the same way."""
    compiled = getattr(dataclasses, _FROZEN_METHODS)
    setattr(dataclasses, _FROZEN_METHODS, _frozen_methods)
    try:
        return dataclasses.dataclass(cls, repr=False, eq=False, **options)
    finally:
        setattr(dataclasses, _FROZEN_METHODS, compiled)


def _frozen_methods(
    cls: type[Any], fields: list[dataclasses.Field[Any]], globals: dict[str, Any]
) -> tuple[Callable[..., None], Callable[..., None]]:
    """What dataclasses._frozen_get_del_attr returns, without compiling it."""
    names = tuple(f.name for f in fields)
    refused = dataclasses.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise refused(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise refused(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields' values as one tuple, as dataclass's generated methods compare them."""
    if len(names) > 1:
        return operator.attrgetter(*names)
    if names:
        one = operator.attrgetter(names[0])
        return lambda item: (one(item),)
    return lambda item: ()


if TYPE_CHECKING:
    from dataclasses import dataclass as lean_dataclass  # the same class, for mypy
else:

    def lean_dataclass(cls: type[T] | None = None, /, **options: Any) -> Any:
        """`dataclass`, the same class in behaviour, built with less compiling: Python
        3.11's dataclass compiles each generated method from source at import (an
        exec of a few lines, ~0.6M instructions each, ~6 per frozen class; at
        start-up `ls` makes ~50 such classes, a third of its own time). Here
        `__eq__`, `__hash__` and `__repr__` are closures over the fields instead:
        the same comparisons (the fields' tuple, only with its own class), hash and
        text (recursion shown as `...`). For classes that define none of the
        three and ask for no `order`/`unsafe_hash`."""
        for refused in ("repr", "eq", "order", "unsafe_hash"):
            if refused in options:
                raise TypeError(f"lean_dataclass takes no {refused}=; use dataclass")
        if cls is None:
            return lambda later: _record(later, options)
        return _record(cls, options)
