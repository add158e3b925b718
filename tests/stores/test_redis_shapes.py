"""Redis locks that are not strings, against the machine's Redis: redis-semaphore's
sorted-set semaphores (the real npm library, run by node), portalocker's
subscription locks (the real RedisLock in a subprocess), and Redisson's hash locks
(an imitation: Redisson needs a JVM, so the test runs the Lua its RedissonLock
documents in tryLockInnerAsync, HINCRBY then PEXPIRE, on the key layout it keeps).
Each is checked against the library's own answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.npm import npm_packages
from tests.stores.conftest import WAIT_S, RedisHarness, Throwaway, until
from tests.stores.test_redis_break import audit_records, break_cli, lock_id
from tests.stores.test_redis_source import listing

# ----------------------------------------------------------------------------- Redisson

# What RedissonLock.tryLockInnerAsync runs (redisson/redisson, RedissonLock.java):
# take the hash if it does not exist or this owner already holds it, count one more
# reentry, arm the lease; otherwise answer the TTL left. Written out here, not copied.
REDISSON_TRY_LOCK = """
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
"""


def test_redisson_lock_owner_reentrancy_and_a_late_watchdog(
    redis_harness: RedisHarness,
) -> None:
    h, client = redis_harness, redis_harness.client
    key = f"{h.prefix}:order-lock"
    owner = f"{uuid.uuid4()}:57"
    # lock() twice by one thread (reentrant), with the watchdog's 30 s lease.
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, owner) is None
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, owner) is None
    # Redisson's own answer for another owner: held, this much TTL left.
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, f"{uuid.uuid4()}:1") > 0

    lock = next(lk for lk in listing(h.url, *h.patterns())["locks"] if lk["key"] == key)
    assert (lock["format"], lock["state"], lock["name"]) == ("redisson", "active", key)
    assert lock["holder"]["session"] == owner
    client_uuid, thread = owner.split(":")
    assert lock["redisson"]["owners"] == [
        {"client": client_uuid, "thread": int(thread), "reentrancy": 2, "write": False}
    ]
    assert 20 < lock["ttl_seconds"] <= 30
    assert [r["code"] for r in lock["reasons"]] == ["redisson"]

    # No renewal for more than a rhythm: what a watchdog keeps is 20 to 30 s.
    client.pexpire(key, 12_000)
    lock = next(lk for lk in listing(h.url, *h.patterns())["locks"] if lk["key"] == key)
    assert lock["state"] == "active"
    assert [r["code"] for r in lock["reasons"]] == ["watchdog_late", "redisson"]


# What RedissonFairLock's tryLockInnerAsync does for a thread that cannot take the
# lock (redisson/redisson, RedissonFairLock.java): queue it behind the last waiter,
# its timeout that waiter's (or the lock's TTL) plus the fair-lock wait time.
# KEYS: lock, queue, timeouts; ARGV: -, owner, wait ms, now ms. Written out here.
REDISSON_FAIR_ENQUEUE = """
local last = redis.call('lindex', KEYS[2], -1)
local ttl
if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then
  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4])
else
  ttl = redis.call('pttl', KEYS[1])
end
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
"""


def test_redisson_fair_lock_queue_is_its_waiters(redis_harness: RedisHarness) -> None:
    import time

    h, client = redis_harness, redis_harness.client
    key = f"{h.prefix}:fair-lock"
    queue, timeouts = f"redisson_lock_queue:{{{key}}}", f"redisson_lock_timeout:{{{key}}}"
    h.cleanups.append(lambda: client.delete(queue, timeouts))
    owner, first, second = (f"{uuid.uuid4()}:{n}" for n in (1, 2, 3))
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, owner) is None
    now_ms = int(time.time() * 1000)
    for waiter in (first, second):
        keys = (key, queue, timeouts)
        assert client.eval(REDISSON_FAIR_ENQUEUE, 3, *keys, 0, waiter, 300_000, now_ms) > 0
    # The second one's timeout has passed (its thread gave up): Redisson's next
    # attempt drops it.
    client.zadd(timeouts, {second: now_ms - 1_000})

    locks = {lk["id"]: lk for lk in listing(h.url, *h.patterns())["locks"] if lk["key"] == key}
    held = locks[lock_id(h, key)]
    assert held["state"] == "active" and held["blocking"] == [first, second]
    waiting = locks[lock_id(h, key) + f"#waiter={first}"]
    assert waiting["state"] == "waiting" and waiting["blocked_by"] == [owner]
    assert waiting["redisson"]["queue_position"] == 1
    gone = locks[lock_id(h, key) + f"#waiter={second}"]
    assert gone["state"] == "stale"
    assert [r["code"] for r in gone["reasons"]] == ["fair_wait_expired"]


def test_redisson_read_write_lock_and_hashes_that_are_not_locks(
    redis_harness: RedisHarness,
) -> None:
    h, client = redis_harness, redis_harness.client
    # RedissonReadLock's layout: `mode` read, one count per reader `<uuid>:<thread>`.
    rw = f"{h.prefix}:stock-lock"
    readers = [f"{uuid.uuid4()}:1", f"{uuid.uuid4()}:9"]
    client.hset(rw, mapping={"mode": "read", readers[0]: 1, readers[1]: 3})
    client.pexpire(rw, 30_000)
    client.hset(f"{h.prefix}:cfg-lock", mapping={"owner": "bob"})  # a hash, not Redisson's
    locks = {lk["key"]: lk for lk in listing(h.url, *h.patterns())["locks"]}
    assert f"{h.prefix}:cfg-lock" not in locks
    lock = locks[rw]
    assert lock["format"] == "redisson-rwlock" and lock["redisson"]["mode"] == "read"
    assert {f"{o['client']}:{o['thread']}" for o in lock["redisson"]["owners"]} == set(readers)


# ------------------------------------------------------------------- redis-semaphore

HOLDER_JS = r"""
const Redis = require('ioredis');
const { Semaphore } = require('redis-semaphore');
const [url, key, limit, lockTimeout, refresh] = process.argv.slice(2);
const client = new Redis(url);
const opts = { lockTimeout: Number(lockTimeout), acquireAttemptsLimit: 1, onLockLost() {} };
if (refresh !== 'default') opts.refreshInterval = Number(refresh);
const held = [];
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
require('readline').createInterface({ input: process.stdin }).on('line', async (line) => {
  if (line === 'take') {
    const s = new Semaphore(client, key, Number(limit), opts);
    const ok = await s.tryAcquire();
    if (ok) held.push(s);
    say({ took: ok, identifier: s.identifier });
  } else if (line === 'quit') {
    for (const s of held) await s.release();
    await client.quit();
    process.exit(0);
  }
});
say({ ready: true });
"""


@pytest.fixture(scope="session")
def node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """redis-semaphore and ioredis from npm."""
    return npm_packages(tmp_path_factory, "redis-semaphore@5", "ioredis@5")


class NodeHolder:
    def __init__(
        self,
        modules: Path,
        url: str,
        key: str,
        limit: int,
        timeout_ms: int,
        refresh_ms: int | None = None,
    ) -> None:
        """`refresh_ms`: the holder's refreshInterval (0: never refreshes); None:
        the library's default (0.8 of the lockTimeout)."""
        script = modules / "holder.js"
        script.write_text(HOLDER_JS)
        self.process = subprocess.Popen(
            [
                "node",
                str(script),
                url,
                key,
                str(limit),
                str(timeout_ms),
                "default" if refresh_ms is None else str(refresh_ms),
            ],
            cwd=modules,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.read() == {"ready": True}

    def read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()  # the holder answers each command with one line
        assert line, "the node holder exited"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def take(self) -> dict[str, Any]:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write("take\n")
        stdin.flush()
        return self.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=WAIT_S)


@pytest.fixture
def node_holders(node_modules: Path) -> Iterator[list[NodeHolder]]:
    started: list[NodeHolder] = []
    yield started
    for holder in started:
        holder.stop()


def semaphore_holders(h: RedisHarness, key: str) -> list[dict[str, Any]]:
    document = listing(h.url, *h.patterns(), "--redis-pattern", f"semaphore:{h.prefix}*")
    return [lk for lk in document["locks"] if lk["key"] == f"semaphore:{key}"]


def test_full_semaphore_lists_both_holders(
    redis_harness: RedisHarness,
    node_modules: Path,
    node_holders: list[NodeHolder],
    tmp_path: Path,
) -> None:
    h = redis_harness
    name = f"{h.prefix}-jobs-lock"
    holder = NodeHolder(node_modules, h.url, name, 2, 10_000)
    node_holders.append(holder)
    first, second = holder.take(), holder.take()
    assert first["took"] and second["took"]
    assert holder.take()["took"] is False  # the library's answer: full

    locks = semaphore_holders(h, name)
    assert {lk["holder"]["session"] for lk in locks} == {first["identifier"], second["identifier"]}
    for lk in locks:
        assert (lk["format"], lk["name"], lk["state"]) == ("redis-semaphore", name, "active")
        assert lk["id"].endswith(f"#holder={lk['holder']['session']}")
        semaphore = lk["semaphore"]
        assert semaphore["members"] == 2 and semaphore["holders"] == 2
        assert semaphore["limit"] is None  # not stored in Redis
        assert semaphore["lock_timeout_seconds"] == pytest.approx(10, abs=0.5)
        score = h.client.zscore(f"semaphore:{name}", lk["holder"]["session"])
        assert lk["acquired_at"] is not None and score is not None
        assert [r["code"] for r in lk["reasons"]] == ["semaphore"]
        assert "not stored in Redis" in lk["reasons"][0]["message"]

    # Where the operator names the limit, it is known, and the semaphore is full.
    config = tmp_path / "lockwatch.toml"
    config.write_text(f'[redis]\nsemaphore_limits = {{ "{name}" = 2 }}\n')
    document = listing(
        h.url,
        "--config",
        str(config),
        *h.patterns(),
        "--redis-pattern",
        f"semaphore:{h.prefix}*",
    )
    configured = [lk for lk in document["locks"] if lk["key"] == f"semaphore:{name}"]
    assert len(configured) == 2
    for lk in configured:
        assert lk["semaphore"]["limit"] == 2
        assert "full" in lk["reasons"][0]["message"]


def test_semaphore_holder_past_its_lock_timeout_is_stale_as_the_library_says(
    redis_harness: RedisHarness, node_modules: Path, node_holders: list[NodeHolder]
) -> None:
    h = redis_harness
    name = f"{h.prefix}-batch-lock"
    # Both with a 5 s lockTimeout. The stuck one is stopped before its first refresh;
    # the other takes its permit later and never refreshes, so the key (re-armed to
    # 5 s by that take) outlives the stuck one's member by what passed in between.
    stuck = NodeHolder(node_modules, h.url, name, 2, 5_000)
    late = NodeHolder(node_modules, h.url, name, 2, 5_000, refresh_ms=0)
    node_holders.extend([stuck, late])
    gone = stuck.take()["identifier"]
    os.kill(stuck.process.pid, signal.SIGSTOP)
    try:

        def member(identifier: str) -> dict[str, Any] | None:
            found = {lk["holder"]["session"]: lk for lk in semaphore_holders(h, name)}
            return found.get(identifier)

        def half_gone() -> bool:
            lock = member(gone)
            return lock is not None and lock["ttl_seconds"] < 2.5

        until(half_gone, "half of the stuck holder's lockTimeout to pass")
        kept = late.take()
        assert kept["took"] is True
        assert late.take()["took"] is False  # the library's answer: full, both count

        def stale() -> dict[str, Any] | None:
            lock = member(gone)
            return lock if lock is not None and lock["state"] == "stale" else None

        lock = until(stale, "the stuck holder to pass its lockTimeout")
        assert next(r["code"] for r in lock["reasons"]) == "semaphore_expired"
        assert lock["semaphore"]["expired"] is True
        other = member(kept["identifier"])
        assert other is not None and other["state"] == "active"
        # The library's answer: the expired member no longer counts (and goes).
        assert late.take()["took"] is True
        assert member(gone) is None
    finally:
        os.kill(stuck.process.pid, signal.SIGCONT)


# ------------------------------------------------------------------------- portalocker

PORTALOCKER_HOLDER = """
import sys, portalocker
lock = portalocker.RedisLock(sys.argv[1], redis_kwargs=dict(
    host=sys.argv[2], port=int(sys.argv[3]), db=int(sys.argv[4])))
lock.acquire(timeout=5)
print(lock.client_name, flush=True)
sys.stdin.readline()
"""


def portalocker_kwargs(h: RedisHarness) -> dict[str, Any]:
    import redis

    kwargs = redis.Redis.from_url(h.url).connection_pool.connection_kwargs
    return {"host": kwargs["host"], "port": kwargs["port"], "db": kwargs.get("db", 0)}


@pytest.fixture
def portalocker_holder(redis_harness: RedisHarness) -> Iterator[tuple[str, str]]:
    h = redis_harness
    channel = f"{h.prefix}-deploy"
    where = portalocker_kwargs(h)
    process = subprocess.Popen(
        [sys.executable, "-c", PORTALOCKER_HOLDER, channel,
         where["host"], str(where["port"]), str(where["db"])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    name = process.stdout.readline().strip()
    assert name.startswith(f"{channel}-lock-")
    try:
        yield channel, name
    finally:
        process.kill()
        process.wait(timeout=WAIT_S)


def portalocker_says_held(h: RedisHarness, channel: str) -> bool:
    import portalocker

    lock = portalocker.RedisLock(
        channel, redis_kwargs=portalocker_kwargs(h), fail_when_locked=True, timeout=0
    )
    try:
        lock.acquire(timeout=0)
    except portalocker.AlreadyLocked:
        return True
    lock.release()
    return False


def test_subscription_lock_found_from_client_list_and_broken_by_client_kill(
    redis_harness: RedisHarness, portalocker_holder: tuple[str, str], tmp_path: Path
) -> None:
    h = redis_harness
    channel, name = portalocker_holder
    assert portalocker_says_held(h, channel)
    (lock,) = [lk for lk in listing(h.url)["locks"] if lk["name"] == channel]
    (connection,) = [c for c in h.client.client_list() if c["name"] == name]
    assert lock["format"] == "portalocker-redis" and lock["state"] == "active"
    assert lock["id"] == lock_id(h, channel) + f"#pubsub={connection['id']}"
    subscription = lock["subscription"]
    assert subscription["client_id"] == int(connection["id"])
    assert subscription["addr"] == connection["addr"] and subscription["name"] == name
    assert subscription["subscribers"] == 1 and subscription["holders"] == 1
    assert [r["code"] for r in lock["reasons"]] == ["subscription"]

    audit = tmp_path / "audit.jsonl"
    code, out, err = break_cli(h, lock["id"], audit, "--force")
    assert code == 0, err
    assert f"killed connection {connection['id']}" in out
    assert not any(c["name"] == name for c in h.client.client_list())
    until(lambda: not portalocker_says_held(h, channel), "portalocker to see it free")
    done = audit_records(audit)[-1]
    assert done["event"] == "lock_broken"
    assert done["client_id"] == int(connection["id"]) and done["client_name"] == name

    # The connection is gone now: a second break refuses, killing nothing.
    code, _, err = break_cli(h, lock["id"], audit, "--force")
    assert code != 0
    assert [lk for lk in listing(h.url)["locks"] if lk["name"] == channel] == []


def test_default_patterns_find_redisson_s_and_redis_semaphore_s_keys(
    redis_harness: RedisHarness,
) -> None:
    h, client = redis_harness, redis_harness.client
    camel = f"{h.prefix}orderLock"  # Redisson's getLock("orderLock"), Java's naming
    client.eval(REDISSON_TRY_LOCK, 1, camel, 30_000, f"{uuid.uuid4()}:1")
    # redis-semaphore keeps `semaphore:<name>` beside its Mutex's `mutex:<name>`:
    # found by default where the name ends in lock, as the mutex is.
    client.zadd(f"semaphore:{h.prefix}-jobs-lock", {str(uuid.uuid4()): 1_700_000_000_000})
    client.pexpire(f"semaphore:{h.prefix}-jobs-lock", 30_000)
    client.set(f"mutex:{h.prefix}-jobs-lock", str(uuid.uuid4()), px=30_000)
    mine = {
        (lk["key"], lk["format"])
        for lk in listing(h.url)["locks"]
        if h.prefix in lk["key"] and lk["source"] == "redis"
    }
    assert mine == {
        (camel, "redisson"),
        (f"semaphore:{h.prefix}-jobs-lock", "redis-semaphore"),
        (f"mutex:{h.prefix}-jobs-lock", "redis"),
    }


def test_subscription_lock_shown_where_pubsub_is_refused(
    throwaway_redis: Callable[..., Throwaway],
) -> None:
    # A monitoring user that may not run PUBSUB: the holder is still CLIENT LIST's.
    server = throwaway_redis("--user", "monitor", "on", "nopass", "~*", "&*", "+@all", "-pubsub")
    where = {"host": "127.0.0.1", "port": server.port, "db": 0}
    process = subprocess.Popen(
        [sys.executable, "-c", PORTALOCKER_HOLDER, "nightly",
         "127.0.0.1", str(server.port), "0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        name = process.stdout.readline().strip()
        import portalocker

        with pytest.raises(portalocker.AlreadyLocked):
            portalocker.RedisLock("nightly", redis_kwargs=where, fail_when_locked=True).acquire(
                timeout=0
            )
        url = f"redis://monitor@127.0.0.1:{server.port}/0"
        (lock,) = [lk for lk in listing(url)["locks"] if lk["name"] == "nightly"]
        assert lock["subscription"]["name"] == name
        assert lock["subscription"]["subscribers"] is None
    finally:
        process.kill()
        process.wait(timeout=WAIT_S)


def test_members_read_are_capped_per_key_and_per_poll(
    redis_harness: RedisHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockwatch.sources.redis import server as redis_server
    from lockwatch.sources.redis.endpoint import parse
    from lockwatch.sources.redis.records import to_locks

    h, client = redis_harness, redis_harness.client
    base = 1_700_000_000_000
    for number in range(3):
        key = f"semaphore:{h.prefix}-{number}-lock"
        client.zadd(key, {f"holder-{i}": base + i for i in range(150)})
        client.pexpire(key, 60_000)
    # A batch per key, and room for a key and a half.
    monkeypatch.setattr(redis_server, "BATCH", 1)
    monkeypatch.setattr(redis_server, "MAX_ENTRIES", 150)
    server = redis_server.RedisServer(parse(h.url, {}), (f"semaphore:{h.prefix}*",))
    try:
        snapshot = server.poll()
    finally:
        server.close()
    assert snapshot is not None
    read = {found.key: found for found in snapshot.collections}
    assert len(read) == 2 and snapshot.entries_truncated
    assert all(found.size == 150 and len(found.entries) == 100 for found in read.values())
    assert server.status.reason is not None and "150 entries" in server.status.reason
    holders = [lock for lock in to_locks(snapshot) if lock.format == "redis-semaphore"]
    assert len(holders) == 200
