"""Which tool a lock table belongs to by its name: only the tools' default names.
A table the config names (`deploy_lock`) found in another schema or database
than the entry's is nobody's, not knex's for its `_lock` ending."""

from __future__ import annotations

import pytest

from lockwatch.sources.locktables.facts import KNEX, LIQUIBASE
from lockwatch.sources.locktables.rows import tool_of


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("knex_migrations_lock", KNEX),
        ("KNEX_MIGRATIONS_LOCK", KNEX),
        ("databasechangeloglock", LIQUIBASE),
        ("DATABASECHANGELOGLOCK", LIQUIBASE),
        ("deploy_lock", None),
        ("_lock", None),
        ("databasechangelog", None),
        ("", None),
    ],
)
def test_tool_of_a_table_name(name: str, tool: str | None) -> None:
    assert tool_of(name) == tool
