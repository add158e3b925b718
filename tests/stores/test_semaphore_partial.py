"""A redis-semaphore set read in part (its first MAX_MEMBERS members by score):
the holder whose permits run past the cut may hold more than lockwatch saw, so
its break, which would ZREM only the members seen and leave the rest counted,
is refused; the holders read whole break as usual. Pure: a collection as the
poll reads it (the real library's breaks are test_redis_library_breaks.py's)."""

from __future__ import annotations

from datetime import UTC, datetime

from lockwatch.model.action import Kind
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.redis.librarybreaks import plan_semaphore
from lockwatch.sources.redis.semaphore import SemaphoreFacts, to_locks
from lockwatch.sources.redis.server import MAX_MEMBERS, RedisCollection, RedisSnapshot

NOW = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
SCORE = str(int(NOW.timestamp() * 1000) - 1_000)
LATER = str(int(SCORE) + 500)  # the newest acquire: last by score, where the read stops


def test_the_holder_at_the_cut_is_partial_and_its_break_refused() -> None:
    # 97 single holders, then a MultiSemaphore holder of 10 permits: 3 read.
    entries = [(f"solo-{i:03d}", SCORE) for i in range(MAX_MEMBERS - 3)]
    entries += [(f"multi_{i}", LATER) for i in range(3)]
    found = RedisCollection("semaphore:jobs", "zset", 10_000, MAX_MEMBERS + 7, tuple(entries))
    snapshot = RedisSnapshot("cache:6379/0", 0, NOW, [], [], collections=(found,))
    locks = {lock.holder.session: lock for lock in to_locks(snapshot, found, {})}
    verdict = Verdict(State.ACTIVE)

    multi = locks["multi"]
    assert isinstance(multi.facts, SemaphoreFacts) and multi.facts.partial
    refused = plan_semaphore(Kind.BREAK, multi, verdict, multi.facts)
    assert refused.refusal is not None and refused.refusal[0] == "partial", refused

    solo = locks["solo-000"]
    assert isinstance(solo.facts, SemaphoreFacts) and not solo.facts.partial
    assert plan_semaphore(Kind.BREAK, solo, verdict, solo.facts).refusal is None


def test_a_set_read_whole_has_no_partial_holder() -> None:
    entries = tuple(sorted((f"multi_{i}", SCORE) for i in range(3)))
    found = RedisCollection("semaphore:jobs", "zset", 10_000, 3, entries)
    snapshot = RedisSnapshot("cache:6379/0", 0, NOW, [], [], collections=(found,))
    (lock,) = to_locks(snapshot, found, {})
    assert isinstance(lock.facts, SemaphoreFacts) and not lock.facts.partial
