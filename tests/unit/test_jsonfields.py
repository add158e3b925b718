"""The declared JSON field tables (model/jsonfields.py): keys in the table's
order, renamed and dotted attributes, properties and computed entries."""

from __future__ import annotations

from dataclasses import dataclass

from lockwatch.model.jsonfields import JsonFields


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
    table = JsonFields("name", ("n", "count"), ("device", "inner.device"), "double")
    record = table(Outer("a", 3, Inner(7)))
    assert list(record.items()) == [("name", "a"), ("n", 3), ("device", 7), ("double", 6)]


def test_computed_entries_and_a_one_entry_table() -> None:
    table = JsonFields("name", ("tags", lambda o: list(o.tags)), ("empty", lambda o: None))
    assert table(Outer("a", 1, Inner(0), ("x",))) == {"name": "a", "tags": ["x"], "empty": None}
    assert JsonFields("count")(Outer("a", 1, Inner(0))) == {"count": 1}
    assert JsonFields()(Outer("a", 1, Inner(0))) == {}
