"""A Redis fair-lock queue recorded into the history (issue 44), on the local
Redis: RedissonFairLock's own scripts (as tests/stores/test_redis_shapes.py has
them: Redisson is Java, not installable here) hold a lock and queue two threads
behind it; the holder lets go, the queue head takes it and lets go, the next
takes it. The history has the holder's episode (both queued behind it, the head
acquired) and the head's (the next acquired)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from tests.history.harness import reader, recording, wait_until
from tests.stores.conftest import RedisHarness
from tests.stores.test_redis_shapes import REDISSON_FAIR_ENQUEUE, REDISSON_TRY_LOCK

# What RedissonFairLock does when the queue's head takes the freed lock.
TAKE_AS_HEAD = """
redis.call('lpop', KEYS[2])
redis.call('zrem', KEYS[3], ARGV[2])
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
"""


def test_a_fair_lock_queue_is_recorded(redis_harness: RedisHarness, tmp_path: Path) -> None:
    h, client = redis_harness, redis_harness.client
    key = f"{h.prefix}:fair-lock"
    queue, timeouts = f"redisson_lock_queue:{{{key}}}", f"redisson_lock_timeout:{{{key}}}"
    h.cleanups.append(lambda: client.delete(key, queue, timeouts))
    owner, first, second = (f"{uuid.uuid4()}:{n}" for n in (1, 2, 3))
    keys = (key, queue, timeouts)
    history = tmp_path / "history.sqlite3"

    def waiting() -> set[str]:
        found = set()
        for entry in list(watcher.board.entries.values()):
            facts = entry.lock.facts
            waits = None if facts is None else facts.waits()
            if waits is not None:
                found.add(str(waits[0]))
        return found

    with recording(["--redis", h.url, *h.patterns()], history, 0.2) as watcher:
        assert client.eval(REDISSON_TRY_LOCK, 1, key, 60_000, owner) is None
        now_ms = int(time.time() * 1000)
        for waiter in (first, second):
            assert client.eval(REDISSON_FAIR_ENQUEUE, 3, *keys, 0, waiter, 300_000, now_ms) > 0
        wait_until(lambda: {first, second} <= waiting(), "both queued on the board")
        client.delete(key)
        client.eval(TAKE_AS_HEAD, 3, *keys, 60_000, first)
        wait_until(lambda: first not in waiting() and second in waiting(), "the head's turn")
        client.delete(key)
        client.eval(TAKE_AS_HEAD, 3, *keys, 60_000, second)
        wait_until(lambda: not waiting() & {first, second}, "the queue empty")
    episodes = {e.blocker.node: e for e in reader(history).episodes() if e.waiters}
    behind_owner = episodes[owner]
    assert {w.node for w in behind_owner.waiters} == {first, second}
    assert {w.node: w.outcome for w in behind_owner.waiters}[first] == "acquired"
    assert behind_owner.source == "redis"
    behind_first = episodes[first]
    assert [(w.node, w.outcome) for w in behind_first.waiters] == [(second, "acquired")]
