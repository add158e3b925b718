"""The registry's promises to everything built from it."""

from __future__ import annotations

from lockwatch.sources import registry
from lockwatch.sources.contract import LABEL_WIDTH


def test_names_prefixes_and_labels_are_unique() -> None:
    for attribute in ("name", "id_prefix", "label"):
        values = [getattr(source, attribute) for source in registry.SOURCES]
        assert len(set(values)) == len(values), (attribute, values)


def test_every_label_fits_the_source_column() -> None:
    for source in registry.SOURCES:
        assert 0 < len(source.label) <= LABEL_WIDTH, source.name
        assert registry.label(source.name) == source.label


def test_a_source_this_build_lacks_is_shown_by_its_name() -> None:
    """A recording from a newer lockwatch may name a source unknown here."""
    assert registry.label("zookeeper") == "zookeeper"
    assert registry.by_name("zookeeper") is None
