"""What `lockwatch ls --json --pg DSN` imports, on a real server (issue 42):
the PostgreSQL listing and psycopg, and no other source's package, no actions,
no Textual (the lists are in tests/cli/test_start_imports.py)."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_start_imports import (
    LS_PG_OWN,
    LS_PG_PACKAGES,
    STARTUP,
    loaded,
    named,
    unlisted_and_missing,
)


def test_ls_pg_imports_the_postgres_listing_and_nothing_else(pg_dsn: str, tmp_path: Path) -> None:
    ours, others = loaded(tmp_path, "ls", "--json", "--pg", pg_dsn)
    assert unlisted_and_missing(ours, named(STARTUP, LS_PG_OWN)) == ([], [])
    assert others == LS_PG_PACKAGES
