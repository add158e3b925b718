"""Advisory keys as pg_locks shows them, folded back to what the application passed."""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockwatch.model.pg import AdvisoryKey, AdvisoryNames, string_key

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
