"""The declared JSON field tables (model/jsonfields.py): keys in the table's
order, renamed and dotted attributes, properties and computed entries."""

from __future__ import annotations

from dataclasses import dataclass

from lockwatch.model.jsonfields import json_fields


@dataclass(frozen=True)
class Inner:
    device: int


@dataclass(frozen=True)
class Outer:
    name: str
    count: int
    inner: Inner
    tags: tuple[str, ...] = ()

    @property
    def double(self) -> int:
        return self.count * 2


def test_plain_renamed_dotted_and_property_keep_the_table_order() -> None:
    table = json_fields("name", ("n", "count"), ("device", "inner.device"), "double")
    record = table(Outer("a", 3, Inner(7)))
    assert list(record.items()) == [("name", "a"), ("n", 3), ("device", 7), ("double", 6)]


def test_as_a_class_attribute_it_is_the_method() -> None:
    @dataclass(frozen=True, slots=True)
    class Record:
        kind: str
        state: str

        as_json = json_fields("kind", ("status", "state"))

    assert Record("file", "ok").as_json() == {"kind": "file", "status": "ok"}


def test_computed_entries_and_a_one_entry_table() -> None:
    table = json_fields("name", ("tags", lambda o: list(o.tags)), ("empty", lambda o: None))
    assert table(Outer("a", 1, Inner(0), ("x",))) == {"name": "a", "tags": ["x"], "empty": None}
    assert json_fields("count")(Outer("a", 1, Inner(0))) == {"count": 1}
    assert json_fields()(Outer("a", 1, Inner(0))) == {}
