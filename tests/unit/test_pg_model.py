"""Advisory keys as pg_locks shows them, folded back to what the application passed."""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockwatch.sources.postgres.facts import (
    AdvisoryKey,
    AdvisoryNames,
    string_key,
    string_key_int32,
)

INT8 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
INT4 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def as_pg_locks_bigint(key: int) -> tuple[int, int]:
    """classid/objid as PostgreSQL stores a bigint key: high and low 32 bits, unsigned."""
    unsigned = key & (2**64 - 1)
    return unsigned >> 32, unsigned & (2**32 - 1)


@given(INT8)
def test_bigint_keys_round_trip(key: int) -> None:
    classid, objid = as_pg_locks_bigint(key)
    assert AdvisoryKey.from_pg_locks(classid, objid, 1) == AdvisoryKey("bigint", key=key)


@given(INT4, INT4)
def test_pair_keys_round_trip(key1: int, key2: int) -> None:
    folded = AdvisoryKey.from_pg_locks(key1 & 0xFFFFFFFF, key2 & 0xFFFFFFFF, 2)
    assert folded == AdvisoryKey("pair", key1=key1, key2=key2)


@pytest.mark.parametrize(
    ("classid", "objid", "objsubid", "expected"),
    [
        (0, 42, 1, {"form": "bigint", "key": 42}),
        (0xFFFFFFFF, 0xFFFFFFFB, 1, {"form": "bigint", "key": -5}),
        (0x7FFFFFFF, 0xFFFFFFFF, 1, {"form": "bigint", "key": 2**63 - 1}),
        (0x80000000, 0, 1, {"form": "bigint", "key": -(2**63)}),
        (1, 42, 2, {"form": "pair", "key1": 1, "key2": 42}),
        (0xFFFFFFFF, 0x80000000, 2, {"form": "pair", "key1": -1, "key2": -(2**31)}),
        (0x7FFFFFFF, 0, 2, {"form": "pair", "key1": 2**31 - 1, "key2": 0}),
    ],
)
def test_boundaries(classid: int, objid: int, objsubid: int, expected: dict[str, int]) -> None:
    key = AdvisoryKey.from_pg_locks(classid, objid, objsubid)
    assert key is not None
    assert key.as_json() == expected


def test_other_objsubid_is_not_an_advisory_key() -> None:
    assert AdvisoryKey.from_pg_locks(1, 2, 0) is None


def test_string_key_matches_seed_003() -> None:
    for name in ("", "sync:billing", "ünïcode", "x" * 500):
        digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
        assert string_key(name) == struct.unpack("<q", digest)[0]


def test_names() -> None:
    names = AdvisoryNames.build(namespaces={1: "agent"}, keys={7: "seven"}, strings=["billing"])
    assert names.name(AdvisoryKey("pair", key1=1, key2=42)) == "agent:42"
    assert names.name(AdvisoryKey("pair", key1=2, key2=42)) == "2:42"
    assert names.name(AdvisoryKey("bigint", key=7)) == "seven"
    assert names.name(AdvisoryKey("bigint", key=string_key("billing"))) == "billing"
    assert names.name(AdvisoryKey("bigint", key=-9)) == "-9"


def test_explicit_key_names_win_over_hashed_strings() -> None:
    key = string_key("billing")
    names = AdvisoryNames.build(keys={key: "explicit"}, strings=["billing"])
    assert names.name(AdvisoryKey("bigint", key=key)) == "explicit"


def test_int32_string_key_matches_seed_003s_shipped_code() -> None:
    # Its lock_key_from_string: BLAKE2b with a 4-byte digest, unpacked with ">i".
    for name in ("", "agent-sync", "ünïcode", "x" * 500):
        digest = hashlib.blake2b(name.encode("utf-8"), digest_size=4).digest()
        assert string_key_int32(name) == struct.unpack(">i", digest)[0]
        assert -(2**31) <= string_key_int32(name) < 2**31
    # Not the first half of the 8-byte form: the digest size is part of the hash.
    eight = hashlib.blake2b(b"agent-sync", digest_size=8).digest()
    assert string_key_int32("agent-sync") != struct.unpack(">i", eight[:4])[0]


def test_pair_keys_hashed_from_strings_are_named_under_their_namespace() -> None:
    names = AdvisoryNames.build(namespaces={1: "agent"}, pair_strings={1: ["sync"], 2: ["ops"]})
    assert names.name(AdvisoryKey("pair", key1=1, key2=string_key_int32("sync"))) == "agent:sync"
    assert names.name(AdvisoryKey("pair", key1=2, key2=string_key_int32("ops"))) == "2:ops"
    # The same hash under a namespace it was not configured for is just a number.
    other = string_key_int32("sync")
    assert names.name(AdvisoryKey("pair", key1=3, key2=other)) == f"3:{other}"
    # And both forms side by side.
    both = AdvisoryNames.build(strings=["sync"], pair_strings={1: ["sync"]})
    assert both.name(AdvisoryKey("bigint", key=string_key("sync"))) == "sync"
    assert both.name(AdvisoryKey("pair", key1=1, key2=string_key_int32("sync"))) == "1:sync"


def test_config_reads_both_hash_forms_and_rejects_bad_ones() -> None:
    from lockwatch.config import ConfigError
    from lockwatch.sources.postgres.settings import read_settings

    settings = read_settings(
        {"advisory": {"strings": ["billing"], "pair_strings": {"1": ["agent-sync"]}}}, "t.toml"
    )
    names = settings.advisory
    assert names is not None
    assert names.name(AdvisoryKey("bigint", key=string_key("billing"))) == "billing"
    key2 = string_key_int32("agent-sync")
    assert names.name(AdvisoryKey("pair", key1=1, key2=key2)) == "1:agent-sync"
    for bad in (
        {"pair_strings": {"1": "agent-sync"}},  # not a list
        {"pair_strings": {"1": [7]}},
        {"pair_strings": {"x": ["a"]}},
        {"pair_strings": {str(2**31): ["a"]}},  # a pair's keys are int4
        {"pair_strings": ["a"]},
    ):
        with pytest.raises(ConfigError):
            read_settings({"advisory": bad}, "t.toml")


def test_held_bounds_and_cells() -> None:
    from datetime import UTC, datetime, timedelta

    from lockwatch.sources.postgres.facts import PgBackend, PgLock
    from lockwatch.sources.postgres.held import held_bounds, held_cell, held_text

    now = datetime(2026, 1, 1, tzinfo=UTC)
    pg = PgLock(
        "s",
        "advisory",
        "ExclusiveLock",
        True,
        "app",
        PgBackend(pid=1),
        known_held_at=now - timedelta(seconds=192),
        acquired_after=now - timedelta(hours=2),
        level="session",
    )
    assert held_bounds(pg, now) == (192.0, 7200.0)
    assert held_cell(pg, now) == "≥ 3m12s"
    assert held_text(pg, now) == (
        "at least 3m12s, at most 2h00m (since its session began); session-level"
    )
    # Jitter between the two clocks never makes the upper bound the smaller.
    skewed = PgLock(
        "s", "advisory", "ExclusiveLock", True, "app", PgBackend(pid=1),
        known_held_at=now - timedelta(seconds=10), acquired_after=now - timedelta(seconds=9.8),
    )  # fmt: skip
    assert held_bounds(skewed, now) == (10.0, 10.0)


@pytest.mark.parametrize(
    ("least", "most", "cell", "words"),
    [
        # A lower bound rounds down, an upper one up: both stay true.
        (1563.0, None, "≥ 26m", "at least 26m03s"),
        (0.2, 11560.0, "≤ 3h13m", "at least 0.2s, at most 3h13m (since its session began)"),
        (47225.0, None, "≥ 13h", "at least 13h07m"),
        (5.0, 59.5, "≥ 5s", "at least 5s, at most 1m00s (since its session began)"),
    ],
)
def test_bounds_in_seven_cells_stay_true(
    least: float, most: float | None, cell: str, words: str
) -> None:
    from datetime import UTC, datetime, timedelta

    from lockwatch.sources.postgres.facts import PgBackend, PgLock
    from lockwatch.sources.postgres.held import held_cell, held_text

    now = datetime(2026, 1, 1, tzinfo=UTC)
    pg = PgLock(
        "s", "advisory", "ExclusiveLock", True, "app", PgBackend(pid=1),
        known_held_at=now - timedelta(seconds=least),
        acquired_after=None if most is None else now - timedelta(seconds=most),
    )  # fmt: skip
    assert held_cell(pg, now) == cell and len(cell) <= 7
    assert held_text(pg, now) == words


# --------------------------------------------------------- secrets in what clients show


@pytest.mark.parametrize(
    ("cmdline", "shown"),
    [
        (
            ("psql", "postgresql://postgres:hunter19pw@127.0.0.1:5432/postgres", "-q"),
            ("psql", "postgresql://postgres:***@127.0.0.1:5432/postgres", "-q"),
        ),
        (
            ("psql", "host=h port=5433 user=postgres password=s3cret dbname=postgres"),
            ("psql", "host=h port=5433 user=postgres password=*** dbname=postgres"),
        ),
        (
            ("worker", "--password", "s3cret", "--db", "x"),
            ("worker", "--password", "***", "--db", "x"),
        ),
        (("worker", "--pgpassword=s3cret"), ("worker", "--pgpassword=***")),
        (("psql", "-h", "db", "-p", "5432"), ("psql", "-h", "db", "-p", "5432")),
        (("psql", "--password", "-h", "db"), ("psql", "--password", "-h", "db")),
        (
            ("agent", "--auth-token", "s3cret", "--api-key", "s3cret", "--token-file", "f"),
            ("agent", "--auth-token", "***", "--api-key", "***", "--token-file", "f"),
        ),
        (("agent", "--client-secret=s3cret"), ("agent", "--client-secret=***")),
    ],
)
def test_a_client_command_line_shows_no_password(
    cmdline: tuple[str, ...], shown: tuple[str, ...]
) -> None:
    from lockwatch.sources.postgres.facts import PgClient

    client = PgClient(pid=7, cmdline=cmdline)
    assert client.cmdline == shown
    assert "s3cret" not in client.label and "hunter19pw" not in client.label


def test_an_application_name_shows_no_password() -> None:
    from lockwatch.sources.postgres.facts import PgBackend

    backend = PgBackend(pid=1, application="app password=hunter20")
    assert backend.application == "app password=***"
    assert PgBackend(pid=1, application="billing-worker").application == "billing-worker"


def test_a_password_percent_encoded_in_a_url_is_scrubbed_too() -> None:
    from lockwatch.sources.postgres.facts import PgClient

    url = "postgresql://u:pw@h/db?application_name=app%20password%3Dhunter20"
    (shown,) = PgClient(pid=7, cmdline=(url,)).cmdline
    assert shown == "postgresql://u:***@h/db?application_name=app%20password%3D***"
