"""`fast_init`: the frozen model classes built once per lock get a faster
`__init__` that must be the dataclass one in everything but speed."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import InitVar, dataclass, field

import pytest

from lockwatch.model.changes import Entry
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.process import ProcessFacts
from lockwatch.model.slots import fast_init, lean_dataclass
from lockwatch.model.verdict import Verdict
from lockwatch.sources.filelocks import FileKey, KernelEvidence
from lockwatch.sources.files.decoders.base import LockFile
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.scanner import Candidate

SPED_UP = (
    Lock,
    Holder,
    Reason,
    Verdict,
    Entry,
    FileKey,
    KernelEvidence,
    ProcessFacts,
    FileFacts,
    LockFile,
    Candidate,
)


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class Fast:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


def test_the_signature_is_the_dataclass_one() -> None:
    assert str(inspect.signature(Fast)) == str(inspect.signature(Plain))
    assert Fast.__init__.__qualname__ == "Fast.__init__"


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1,), {}), ((1, "x"), {}), ((1,), {"c": (2,)}), ((), {"a": 1, "b": "y", "c": (3,)})],
)
def test_it_builds_what_the_dataclass_init_builds(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    fast, plain = Fast(*args, **kwargs), Plain(*args, **kwargs)  # type: ignore[arg-type]
    assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
    assert fast == Fast(*args, **kwargs) and hash(fast) == hash(Fast(*args, **kwargs))  # type: ignore[arg-type]


def test_wrong_arguments_are_refused_as_before() -> None:
    with pytest.raises(TypeError):
        Fast()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Fast(1, d=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Fast(1, "b", (), 4)  # type: ignore[call-arg]


def test_it_stays_frozen_and_replace_and_pickle_work() -> None:
    fast = Fast(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2  # type: ignore[misc]
    assert dataclasses.replace(fast, b="z") == Fast(1, "z")
    assert pickle.loads(pickle.dumps(fast)) == fast


def test_only_frozen_slotted_classes_with_plain_fields() -> None:
    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True, slots=True)
    class Handed:
        a: int
        b: InitVar[int]

        def __post_init__(self, b: int) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class DerivedWithDefault:
        a: int
        b: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class NeverSet:
        a: int
        b: int = field(init=False)

    for cls in (Mutable, Factory, Handed, DerivedWithDefault, NeverSet):
        with pytest.raises(TypeError):
            fast_init(cls)


@dataclass(frozen=True, slots=True)
class PlainWide:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()
    d: float = 0.5


@fast_init
@dataclass(frozen=True, slots=True)
class FastWide:
    """Fields enough that its instances are built open and then frozen."""

    a: int
    b: str = "b"
    c: tuple[int, ...] = ()
    d: float = 0.5


class WideMore(FastWide):
    """A subclass with a slot of its own: another layout than the open twin's."""

    __slots__ = ("e",)


def test_a_wide_class_built_open_is_its_frozen_self() -> None:
    for args in ((1,), (1, "x", (2,), 1.5)):
        fast, plain = FastWide(*args), PlainWide(*args)
        assert type(fast) is FastWide
        assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
        assert pickle.loads(pickle.dumps(fast)) == fast
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.a = 2  # type: ignore[misc]
    more = WideMore(1, "y")
    assert type(more) is WideMore and (more.a, more.b, more.d) == (1, "y", 0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        more.b = "z"  # type: ignore[misc]


@dataclass(frozen=True, slots=True)
class PlainDerived:
    path: str
    size: int = 0
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.path.rpartition("/")[2])


@fast_init
@dataclass(frozen=True, slots=True)
class FastDerived:
    path: str
    size: int = 0
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.path.rpartition("/")[2])


def test_a_field_post_init_derives_is_derived_last() -> None:
    assert str(inspect.signature(FastDerived)) == str(inspect.signature(PlainDerived))
    for args in (("/a/b",), ("/a/b", 3)):
        fast, plain = FastDerived(*args), PlainDerived(*args)
        assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
        assert fast.name == "b" and pickle.loads(pickle.dumps(fast)) == fast
    with pytest.raises(TypeError):
        FastDerived("/a", 1, "b")  # type: ignore[call-arg]


@pytest.mark.parametrize("cls", SPED_UP)
def test_the_model_classes_have_it_with_their_own_signature(cls: type) -> None:
    init = cls.__dict__["__init__"]
    assert init.__module__ == cls.__module__
    assert "_set_0" in init.__code__.co_names
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    assert list(inspect.signature(cls).parameters) == names


# -- record: dataclass's class with eq, hash and repr made without compiling ------------


@dataclass(frozen=True, slots=True)
class PlainRecord:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()
    hidden: float = field(default=0.0, repr=False, compare=False)


@lean_dataclass(frozen=True, slots=True)
class FastRecord:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()
    hidden: float = field(default=0.0, repr=False, compare=False)


@lean_dataclass(frozen=True, slots=True)
class Single:
    a: float


@lean_dataclass
class Mutable:
    a: int
    items: list[int] = field(default_factory=list)


@lean_dataclass(frozen=True)
class Nested:
    inner: object


def test_a_record_compares_hashes_and_shows_as_the_dataclass() -> None:
    for args in [(1,), (1, "x"), (1, "x", (2, 3), 4.5)]:
        fast, plain = FastRecord(*args), PlainRecord(*args)  # type: ignore[arg-type]
        assert repr(fast) == repr(plain).replace("PlainRecord", "FastRecord")
        assert hash(fast) == hash(plain)
        assert fast == FastRecord(*args) and (fast != FastRecord(*args)) is False  # type: ignore[arg-type]
    assert FastRecord(1, hidden=1.0) == FastRecord(1, hidden=2.0)  # compare=False
    other: object = PlainRecord(1)
    assert FastRecord(1) != FastRecord(2) and FastRecord(1) != other
    assert FastRecord(1).__eq__(PlainRecord(1)) is NotImplemented
    nan = float("nan")
    assert Single(nan) == Single(nan)  # the fields' tuple: the same object is equal
    assert Single(1.0) != Single(2.0) and hash(Single(1.0)) == hash((1.0,))
    assert FastRecord.__repr__.__qualname__ == "FastRecord.__repr__"


def test_a_record_is_a_frozen_slotted_dataclass_that_pickles() -> None:
    fast = FastRecord(1, "x", (2,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2  # type: ignore[misc]
    assert "__slots__" in FastRecord.__dict__ and not hasattr(fast, "__dict__")
    assert [f.name for f in dataclasses.fields(FastRecord)] == ["a", "b", "c", "hidden"]
    assert dataclasses.replace(fast, a=5) == FastRecord(5, "x", (2,))
    assert pickle.loads(pickle.dumps(fast)) == fast
    assert str(inspect.signature(FastRecord)) == str(inspect.signature(PlainRecord))


def test_a_mutable_record_is_unhashable_and_shows_recursion() -> None:
    one = Mutable(1)
    assert Mutable.__dict__["__hash__"] is None and one == Mutable(1) and one != Mutable(2)
    one.items.append(3)
    assert repr(one) == "Mutable(a=1, items=[3])"
    loop = Nested([])
    assert isinstance(loop.inner, list)
    loop.inner.append(loop)
    assert repr(loop) == "Nested(inner=[...])"


def test_a_record_refuses_what_it_does_not_make() -> None:
    with pytest.raises(TypeError, match="order"):
        lean_dataclass(order=True)
    with pytest.raises(TypeError, match="__eq__"):

        @lean_dataclass(frozen=True)
        class Own:
            a: int

            def __eq__(self, other: object) -> bool:
                return True

            __hash__ = object.__hash__


@lean_dataclass(frozen=True)
class FrozenBase:
    a: int
    b: str = "b"


class Open(FrozenBase):
    """Not a dataclass: its own attributes may be set, its base's fields not."""


@dataclass(frozen=True)
class PlainBase:
    a: int
    b: str = "b"


class PlainOpen(PlainBase):
    pass


def test_a_frozen_record_refuses_changes_as_the_dataclass_does() -> None:
    """A frozen record's __setattr__ and __delattr__ are closures (no exec per
    class), with the dataclass's rules and messages: the class itself refuses every
    name, a subclass only its fields."""
    for fast, plain in [(FrozenBase(1), PlainBase(1)), (Open(1), PlainOpen(1))]:
        for name in ("a", "b", "other"):
            if name == "other" and type(fast) is Open:
                continue
            with pytest.raises(dataclasses.FrozenInstanceError) as fast_error:
                setattr(fast, name, 2)
            with pytest.raises(dataclasses.FrozenInstanceError) as plain_error:
                setattr(plain, name, 2)
            assert str(fast_error.value) == str(plain_error.value)
            with pytest.raises(dataclasses.FrozenInstanceError) as fast_error:
                delattr(fast, name)
            with pytest.raises(dataclasses.FrozenInstanceError) as plain_error:
                delattr(plain, name)
            assert str(fast_error.value) == str(plain_error.value)
    opened, plain_opened = Open(1), PlainOpen(1)
    opened.other = 3  # type: ignore[attr-defined]
    plain_opened.other = 3  # type: ignore[attr-defined]
    del opened.other  # type: ignore[attr-defined]
    del plain_opened.other  # type: ignore[attr-defined]
    assert not hasattr(opened, "other") and not hasattr(plain_opened, "other")
    assert FrozenBase.__setattr__.__qualname__ == "FrozenBase.__setattr__"
    assert FrozenBase.__setattr__.__code__.co_filename == inspect.getfile(lean_dataclass)
    # dataclass's own maker is back for every other class.
    assert PlainBase.__setattr__.__code__.co_filename != inspect.getfile(lean_dataclass)
    assert FrozenBase.__dataclass_params__.frozen  # type: ignore[attr-defined]
