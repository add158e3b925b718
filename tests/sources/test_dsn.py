"""Which servers, what to call them, and never a password."""

from __future__ import annotations

import pytest

from lockwatch.sources.postgres.dsn import display_name, resolve_dsns, scrub
from lockwatch.sources.postgres.source import describe


def test_flags_beat_env_beat_config_beat_libpq() -> None:
    env = {"LOCKWATCH_PG": "postgresql://env@h/db", "PGHOST": "libpq-host"}
    assert resolve_dsns(["a", "b", "a"], ["c"], env) == ["a", "b"]
    assert resolve_dsns([], ["c"], env) == ["postgresql://env@h/db"]
    assert resolve_dsns([], ["c", "d"], {"PGHOST": "x"}) == ["c", "d"]
    assert resolve_dsns([], [], {"PGHOST": "x"}) == [""]
    assert resolve_dsns([], [], {"PGDATABASE": "app"}) == [""]
    assert resolve_dsns([], [], {"PGUSER": "only-a-user", "HOME": "/root"}) == []


@pytest.mark.parametrize(
    ("dsn", "name"),
    [
        ("postgresql://mon:s3cret-pw@db1:5433/app", "mon@db1:5433/app"),
        ("host=db2 user=mon password=s3cret-pw dbname=app", "mon@db2:5432/app"),
        ("postgresql://mon@/app?host=/run/postgresql", "mon@local:5432/app"),
    ],
)
def test_display_name_has_no_password(dsn: str, name: str) -> None:
    assert display_name(dsn) == name
    assert "s3cret" not in display_name(dsn)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://mon:s3cret-pw@db1/app",
        "host=db1 password=s3cret-pw user=mon",
        "host=db1 password='s3cret-pw' user=mon",
        "postgresql://mon:s3cret-pw@db1:notaport/app",  # unparseable still scrubbed
    ],
)
def test_scrub_removes_passwords(dsn: str) -> None:
    message = f"could not connect with {dsn}: refused (s3cret-pw)"
    assert "s3cret" not in scrub(message, dsn)
    assert "s3cret" not in display_name(dsn)


def test_describe_names_the_timeout_and_scrubs() -> None:
    class Timeout(Exception):
        sqlstate = "57014"

    text = describe(Timeout("canceling statement due to statement timeout"), "password=pw-123")
    assert "statement_timeout" in text
    assert "pw-123" not in describe(Exception("bad password=pw-123"), "password=pw-123")


def test_unencoded_at_in_a_password_is_refused_before_connecting() -> None:
    import asyncio

    from lockwatch.sources.postgres.dsn import problem
    from lockwatch.sources.postgres.source import PgSource

    dsn = "postgresql://u:p@ss-word@localhost:1/db"
    assert problem(dsn) is not None
    assert problem("postgresql://u:p%40ss@localhost/db") is None
    assert problem("host=x password=a@b@c") is None  # key=value form has no authority
    source = PgSource(dsn)
    assert asyncio.run(source.poll()) is None
    assert source.status.state == "error"
    assert "%40" in (source.status.reason or "")
    assert "ss-word" not in source.name + (source.status.reason or "")


def test_session_settings_keep_the_dsns_own_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from lockwatch.sources.postgres.source import PgSource

    monkeypatch.delenv("PGOPTIONS", raising=False)
    options = PgSource("host=db options='-c search_path=app'")._options()
    assert options.startswith("-c search_path=app ")
    assert "-c statement_timeout=2000" in options and "-c lock_timeout=500" in options
    assert "-c default_transaction_read_only=on" in options
    monkeypatch.setenv("PGOPTIONS", "-c work_mem=8MB")
    assert PgSource("host=db")._options().startswith("-c work_mem=8MB ")
