"""docs/adding-a-source.md is the map a new source is written from: its lists of
the contract's members and of what the facts answer are held to the code, so
that a member added to `Source`, `Declared`, `Selected`, `ActionProvider` or
`Facts` without its line in the map (or a line left for a member gone) fails."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from lockwatch.model.facts import Facts
from lockwatch.sources import contract

MAP = Path(__file__).resolve().parent.parent / "docs" / "adding-a-source.md"


def members(cls: type) -> set[str]:
    """The public names `cls` defines: annotated attributes, methods, properties,
    class attributes, its own and those of its bases in the same module (the
    contract's `Described`), not those of Protocol or object."""
    names: set[str] = set()
    for base in cls.__mro__:
        if base.__module__ != cls.__module__:
            continue
        names |= set(inspect.get_annotations(base))
        names |= {
            name
            for name, value in vars(base).items()
            if callable(value) or isinstance(value, property | classmethod | staticmethod)
        }
    return {name for name in names if not name.startswith("_")}


def section(heading: str) -> str:
    """The map's text under the heading that starts with `heading`, to the next
    heading of any level."""
    text = MAP.read_text(encoding="utf-8")
    start = re.search(rf"^#+ {re.escape(heading)}.*$", text, re.MULTILINE)
    assert start is not None, f"the map has no heading {heading!r}"
    end = re.search(r"^#+ ", text[start.end() :], re.MULTILINE)
    return text[start.end() : start.end() + end.start() if end else None]


def listed(heading: str) -> set[str]:
    """The members a section's bullets name: each bullet's leading `names`."""
    names: set[str] = set()
    for line in section(heading).splitlines():
        bullet = re.match(r"^- ((?:`\w+`(?:, )?)+)", line)
        if bullet:
            names.update(re.findall(r"`(\w+)`", bullet.group(1)))
    return names


@pytest.mark.parametrize(
    ("heading", "cls"),
    [
        ("`Declared`", contract.Declared),
        ("`Source`", contract.Source),
        ("`Selected`", contract.Selected),
        ("`ActionProvider`", contract.ActionProvider),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_contract_list_is_the_contract(heading: str, cls: type) -> None:
    written = listed(heading)
    if cls is contract.Source:
        written.discard("hint")  # optional (contract.Hinting), said so in the map
        assert "hint" in members(contract.Hinting)
    code = members(cls)
    assert written - code == set(), f"{heading}: in the map, not in the code"
    assert code - written == set(), f"{heading}: in the code, not in the map"


def test_the_facts_table_is_the_facts_class() -> None:
    rows = [
        line.split("|")[2]
        for line in section("What the facts answer").splitlines()
        if line.startswith("| ") and not line.startswith("| question")
    ]
    # The members, not what the parentheses after them mention.
    bare = [re.sub(r"\([^()]*\)", "", row) for row in rows]
    written = {name for row in bare for name in re.findall(r"`(\w+)`", row)}
    code = members(Facts)
    assert written - code == set(), "in the map, not in Facts"
    assert code - written == set(), "in Facts, not in the map"
