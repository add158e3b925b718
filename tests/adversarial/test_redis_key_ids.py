"""Issue 47 item 16: a Redis key is bytes, and its id names those bytes alone.
`lock:coll\xff` (a real 0xff byte) and `lock:coll\\xff` (a backslash, then `xff`)
once shared one id, and `break` on it deleted the one the operator did not mean.
Against the real Redis server (tests/stores' harness: keys of a unique prefix,
deleted at teardown)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockwatch.sources.redis import ids
from tests.conftest import run_cli
from tests.stores.conftest import (  # noqa: F401 - fixtures, used by name
    RedisHarness,
    redis_harness,
    redis_url,
)

pytestmark = pytest.mark.xdist_group("redis-server")


def listed(h: RedisHarness) -> dict[str, str]:
    """`ls --json`'s ids and tokens of this test's keys."""
    code, out, err = run_cli("ls", "--redis", h.url, *h.patterns(), "--json")
    assert code == 0, err
    return {lock["id"]: lock["token"] for lock in json.loads(out)["locks"]}


def test_a_byte_and_its_spelling_have_two_ids_and_break_takes_the_one_named(
    redis_harness: RedisHarness,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    h = redis_harness
    byte_key = f"lock:{h.prefix}:coll".encode() + b"\xff"
    spelled_key = f"lock:{h.prefix}:coll\\xff".encode()
    h.client.set(byte_key, b"token-of-the-byte", ex=300)
    h.client.set(spelled_key, b"token-of-the-spelling", ex=300)

    found = listed(h)
    assert len(found) == 2, found  # two keys, two ids
    by_token = {token: lock_id for lock_id, token in found.items()}
    byte_id = by_token["token-of-the-byte"]
    assert byte_id.endswith(":coll\\xff")  # a byte not UTF-8 is spelled \xff
    assert by_token["token-of-the-spelling"].endswith(":coll\\\\xff")  # its backslash doubled
    assert ids.parse_redis(byte_id) is not None

    code, _, err = run_cli(
        "break", byte_id, "--redis", h.url, "--reason", "INC-47", "--yes", "--force",
        "--audit-log", str(tmp_path / "audit.jsonl"),
    )  # fmt: skip
    assert code == 0, err
    assert h.client.exists(byte_key) == 0
    assert h.client.get(spelled_key) == b"token-of-the-spelling"  # the other key untouched
    last = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert last["event"] == "lock_broken" and last["target"]["id"] == byte_id


@pytest.mark.parametrize(
    "key",
    [
        "lock:plain",
        "lock:a\\b",
        "lock:trailing\\",
        "lock:a\\\\xff",
        "lock:\\x41",
        "lock:\udcff\\\udcfe",
        "lock:a\\\udcff",
        "lock:dir\\x",
    ],
)
def test_ids_parse_back_to_the_same_bytes(key: str) -> None:
    """Pure: every key's id parses back to its bytes; printable keys without an
    escape-like backslash keep the id they had."""
    lock_id = ids.redis_id("127.0.0.1:6379/0", key)
    parsed = ids.parse_redis(lock_id)
    assert parsed is not None and parsed.key == key
    if key in ("lock:plain", "lock:a\\b", "lock:trailing\\", "lock:dir\\x"):
        assert lock_id == f"redis:127.0.0.1:6379/0:{key}"
