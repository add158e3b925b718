"""`fast_init`: the frozen model classes built once per lock get a faster
`__init__` that must be the dataclass one in everything but speed."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field

import pytest

from lockwatch.model.changes import Entry
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.process import ProcessFacts
from lockwatch.model.slots import fast_init
from lockwatch.model.verdict import Verdict
from lockwatch.sources.filelocks import FileKey, KernelEvidence
from lockwatch.sources.files.facts import FileFacts

SPED_UP = (Lock, Holder, Reason, Verdict, Entry, FileKey, KernelEvidence, ProcessFacts, FileFacts)


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
    class After:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (Mutable, Factory, After):
        with pytest.raises(TypeError):
            fast_init(cls)


@pytest.mark.parametrize("cls", SPED_UP)
def test_the_model_classes_have_it_with_their_own_signature(cls: type) -> None:
    init = cls.__dict__["__init__"]
    assert init.__module__ == cls.__module__
    assert "_set_0" in init.__code__.co_names
    names = [f.name for f in dataclasses.fields(cls)]
    assert list(inspect.signature(cls).parameters) == names
