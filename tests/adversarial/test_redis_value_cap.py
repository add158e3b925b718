"""A Redis lock key's value is read as a lock file is, its first 64 KiB (issue
47, item 11): a 50 MiB `lock:huge` made a 105 MB `ls --json` (the token printed
twice) and 653 MB RSS. Now GETRANGE reads its start and STRLEN its length; the
record says the value was cut (`value_bytes`, reason `value_cut`), carries no
sha256 of a value it did not read, and a break is refused: it could not compare
the token. Against the machine's real Redis (a key of this test's own)."""

from __future__ import annotations

import json
from pathlib import Path

from lockwatch.sources.redis.server import MAX_VALUE_BYTES
from tests.conftest import run_cli
from tests.stores.conftest import RedisHarness, redis_harness, redis_url
from tests.stores.test_redis_break import break_cli, lock_id

__all__ = ["redis_harness", "redis_url"]  # the fixtures, imported for these tests

HUGE = 8 * 1024 * 1024  # past the cap many times over; light on a shared server


def test_a_huge_value_is_read_in_part_and_said_to_be(redis_harness: RedisHarness) -> None:
    h = redis_harness
    key = f"lock:{h.prefix}huge"
    h.client.set(key, b"t" * HUGE, ex=300)
    code, out, err = run_cli("ls", "--redis", h.url, "--json", *h.patterns())
    assert code == 0, err
    # The value's start, a few times over: never the value itself.
    assert len(out) < 8 * MAX_VALUE_BYTES, len(out)
    (lock,) = [lock for lock in json.loads(out)["locks"] if lock["key"] == key]
    assert lock["value_bytes"] == HUGE
    assert lock["token"] == "t" * MAX_VALUE_BYTES
    assert lock["sha256"] is None
    # Held, as its library sees it (the key is there); the cut is said, not hidden.
    assert lock["state"] == "active"
    codes = [reason["code"] for reason in lock["reasons"]]
    assert "value_cut" in codes


def test_a_value_read_in_part_is_not_broken(redis_harness: RedisHarness, tmp_path: Path) -> None:
    h = redis_harness
    key = f"lock:{h.prefix}huge"
    h.client.set(key, b"t" * HUGE, ex=300)
    code, _, err = break_cli(h, lock_id(h, key), tmp_path / "audit.jsonl", "--force")
    assert code != 0
    assert "more than lockwatch reads" in err and len(err.strip().splitlines()) == 1
    assert h.client.strlen(key) == HUGE  # untouched


def test_a_value_within_the_cap_is_read_whole(redis_harness: RedisHarness) -> None:
    h = redis_harness
    key = f"lock:{h.prefix}fits"
    h.client.set(key, b"t" * MAX_VALUE_BYTES, ex=300)
    code, out, err = run_cli("ls", "--redis", h.url, "--json", *h.patterns())
    assert code == 0, err
    (lock,) = [lock for lock in json.loads(out)["locks"] if lock["key"] == key]
    assert "value_bytes" not in lock and lock["sha256"] is not None
