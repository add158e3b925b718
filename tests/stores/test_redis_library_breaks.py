"""Breaking Redisson locks and redis-semaphore holders against the machine's Redis:
what each library's own unlock does, as one Lua compare-and-swap, audited.

redis-semaphore is the real npm library run by node: its holders take, refresh
(its own refresh code, `_processRefresh`, called on a command rather than on a
timer, so no timing decides a test) and acquire again, and their answers are
the library's. Redisson is an imitation: it needs a JVM, so the test writes the
hash layout its RedissonLock, RedissonFairLock and RedissonWriteLock document
(the owner fields and counts tryLockInnerAsync keeps, the fair lock's queue and
timeouts) and listens on the channels its waiters subscribe to
(`redisson_lock__channel:{<name>}`, `…:<waiter>` for a fair lock's,
`redisson_rwlock:{<name>}`), checking what forceUnlock would have told them."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from lockwatch.actions.audit import AuditLog, Operator
from lockwatch.actions.plan import Kind, Plan
from lockwatch.actions.run import Executor, Outcome
from lockwatch.actions.targets import find, prepare
from lockwatch.clock import SystemClock
from lockwatch.config import Config
from lockwatch.sources.contract import Wanted
from tests.stores.conftest import WAIT_S, RedisHarness, until
from tests.stores.test_redis_break import audit_records, break_cli, lock_id
from tests.stores.test_redis_shapes import REDISSON_TRY_LOCK, node_modules
from tests.stores.test_redis_source import listing

__all__ = ["node_modules"]  # the fixture, shared with the shapes' tests


def plan_for(h: RedisHarness, target: str) -> Plan:
    """The break the CLI would plan for `target`, as the operator saw it now."""
    wanted = Wanted((), {"redis_urls": (h.url,)}, Config(), {})
    found = find(target, wanted, "host")
    assert not isinstance(found, str), found
    lock, verdict, peers = found
    plan = prepare(Kind.BREAK, lock, verdict, peers=peers)
    assert plan.refusal is None, plan.refusal
    return plan


def run(plan: Plan, audit: Path) -> Outcome:
    operator = Operator("op", "op", None)
    log = AuditLog(audit, clock=SystemClock(), host="h", operator=operator)
    return Executor(log).run(plan, "stuck, INC-11", force=True)


class Listener:
    """A Redisson waiter's subscription: what it would be told."""

    def __init__(self, h: RedisHarness, channel: str) -> None:
        self.pubsub = h.new_client().pubsub()
        self.pubsub.subscribe(channel)
        h.cleanups.append(self.pubsub.close)
        first = self.pubsub.get_message(timeout=WAIT_S)
        assert first is not None and first["type"] == "subscribe"

    def told(self) -> bytes | None:
        message = self.pubsub.get_message(timeout=WAIT_S)
        return None if message is None else bytes(message["data"])


# ----------------------------------------------------------------------------- Redisson


def test_redisson_lock_broken_as_force_unlock_tells_its_waiters(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    h, client = redis_harness, redis_harness.client
    key = f"{h.prefix}:order-lock"
    owner = f"{uuid.uuid4()}:57"
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, owner) is None
    waiter = Listener(h, f"redisson_lock__channel:{{{key}}}")
    audit = tmp_path / "audit.jsonl"

    code, _, err = break_cli(h, lock_id(h, key), audit)
    assert code == 1 and "--force" in err  # active: only with its name typed
    assert client.exists(key) == 1

    code, out, err = break_cli(h, lock_id(h, key), audit, "--force")
    assert code == 0, err
    assert client.exists(key) == 0
    assert waiter.told() == b"0"  # LockPubSub.UNLOCK_MESSAGE: a waiter tries now
    assert "to put it back: HSET" in out
    done = audit_records(audit)[-1]
    assert done["event"] == "lock_broken"
    assert done["previous_hash"] == {owner: "1"}
    assert done["channel"] == f"redisson_lock__channel:{{{key}}}" and done["message"] == "0"
    assert done["receivers"] == 1 and 0 < done["ttl_ms"] <= 30_000
    assert "forceUnlock" in done["effect"]


def test_redisson_break_is_refused_when_the_hash_changed_or_is_gone(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    h, client = redis_harness, redis_harness.client
    key = f"{h.prefix}:pay-lock"
    owner, other = f"{uuid.uuid4()}:3", f"{uuid.uuid4()}:4"
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, owner) is None
    plan = plan_for(h, lock_id(h, key))
    assert "only if the hash is still exactly" in plan.effect
    audit = tmp_path / "audit.jsonl"

    # Its holder locked it again (reentrant) since the operator looked: alive.
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, owner) is None
    outcome = run(plan, audit)
    assert not outcome.ok and outcome.code == "changed", outcome.message
    assert client.hgetall(key) == {owner.encode(): b"2"}

    # Released, and taken by another owner.
    client.delete(key)
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, other) is None
    outcome = run(plan, audit)
    assert not outcome.ok and outcome.code == "changed", outcome.message
    assert client.hgetall(key) == {other.encode(): b"1"}

    # The same hash as seen, its TTL renewed since (the watchdog's pexpire): the
    # holder is back at work, though its fields never changed.
    client.delete(key)
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 10_000, owner) is None
    late = plan_for(h, lock_id(h, key))
    client.pexpire(key, 30_000)
    outcome = run(late, audit)
    assert not outcome.ok and outcome.code == "changed", outcome.message
    assert "renewed" in outcome.message and client.exists(key) == 1

    client.delete(key)
    outcome = run(plan, audit)
    assert not outcome.ok and outcome.code == "gone", outcome.message
    events = [r["event"] for r in audit_records(audit)]
    assert events == ["action_intent", "action_refused"] * 4


def test_redisson_fair_lock_break_drops_timed_out_waiters_and_tells_the_next(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    h, client = redis_harness, redis_harness.client
    key = f"{h.prefix}:fair-lock"
    queue, timeouts = f"redisson_lock_queue:{{{key}}}", f"redisson_lock_timeout:{{{key}}}"
    h.cleanups.append(lambda: client.delete(queue, timeouts))
    owner, gave_up, waiting = (f"{uuid.uuid4()}:{n}" for n in (1, 2, 3))
    assert client.eval(REDISSON_TRY_LOCK, 1, key, 30_000, owner) is None
    now_ms = int(time.time() * 1000)
    client.rpush(queue, gave_up, waiting)
    client.zadd(timeouts, {gave_up: now_ms - 60_000, waiting: now_ms + 300_000})
    first = Listener(h, f"redisson_lock__channel:{{{key}}}:{waiting}")
    # A waiter holds nothing to break.
    target = lock_id(h, key) + f"#waiter={waiting}"
    code, _, err = break_cli(h, target, tmp_path / "audit.jsonl", "--force")
    assert code != 0 and "holds nothing" in err, err

    code, _, err = break_cli(h, lock_id(h, key), tmp_path / "audit.jsonl", "--force")
    assert code == 0, err
    assert client.exists(key) == 0
    assert first.told() == b"0"
    assert client.lrange(queue, 0, -1) == [waiting.encode()]  # forceUnlock's pruning
    assert client.zrange(timeouts, 0, -1) == [waiting.encode()]
    done = audit_records(tmp_path / "audit.jsonl")[-1]
    assert done["fair_waiters_dropped"] == 1 and done["receivers"] == 1
    assert [entry["waiter"] for entry in done["fair_waiters_dropped_ids"]] == [gave_up], done


def test_redisson_write_lock_break_wakes_all_its_waiters(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    h, client = redis_harness, redis_harness.client
    key = f"{h.prefix}:stock-lock"
    writer = f"{uuid.uuid4()}:8:write"
    client.hset(key, mapping={"mode": "write", writer: 1})
    client.pexpire(key, 30_000)
    waiters = Listener(h, f"redisson_rwlock:{{{key}}}")
    code, _, err = break_cli(h, lock_id(h, key), tmp_path / "audit.jsonl", "--force")
    assert code == 0, err
    assert client.exists(key) == 0
    assert waiters.told() == b"1"  # RedissonWriteLock's forceUnlock: READ_UNLOCK_MESSAGE


# ------------------------------------------------------------------- redis-semaphore

HOLDER_JS = r"""
const Redis = require('ioredis');
const { Semaphore, MultiSemaphore } = require('redis-semaphore');
const [url, key, limit, permits] = process.argv.slice(2).concat(['1']);
const client = new Redis(url);
const held = [];
const lost = new Set();
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
require('readline').createInterface({ input: process.stdin }).on('line', async (line) => {
  const [command, arg] = line.split(' ');
  if (command === 'take') {
    const n = Number(arg || 1);
    const index = held.length;
    // refreshInterval 0: the library refreshes only when told to, below.
    const opts = { lockTimeout: 60000, refreshInterval: 0, acquireAttemptsLimit: 1,
                   onLockLost() { lost.add(index); } };
    const s = n === 1 ? new Semaphore(client, key, Number(limit), opts)
                      : new MultiSemaphore(client, key, Number(limit), n, opts);
    const ok = await s.tryAcquire();
    held.push(s);
    say({ took: ok, identifier: s.identifier, index });
  } else if (command === 'refresh') {
    // The library's own refresh: re-scores the member, or finds it gone and
    // calls onLockLost.
    const s = held[Number(arg)];
    await s._processRefresh();
    say({ lost: lost.has(Number(arg)), acquired: s.isAcquired });
  } else if (command === 'quit') {
    await client.quit();
    process.exit(0);
  }
});
say({ ready: true });
"""


class Holders:
    """One node process holding redis-semaphore permits, on commands."""

    def __init__(self, modules: Path, url: str, name: str, limit: int) -> None:
        script = modules / "lw-break-holder.js"
        script.write_text(HOLDER_JS)
        self.process = subprocess.Popen(
            ["node", str(script), url, name, str(limit)],
            cwd=modules,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.read() == {"ready": True}

    def read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()  # one line answers each command
        assert line, "the node holder exited"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, command: str) -> dict[str, Any]:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(command + "\n")
        stdin.flush()
        return self.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=WAIT_S)


@pytest.fixture
def holders(node_modules: Path, redis_harness: RedisHarness) -> Iterator[Holders]:
    h = redis_harness
    started = Holders(node_modules, h.url, f"{h.prefix}-jobs-lock", 2)
    yield started
    started.stop()


def semaphore_locks(h: RedisHarness) -> dict[str, dict[str, Any]]:
    document = listing(h.url, *h.patterns(), "--redis-pattern", f"semaphore:{h.prefix}*")
    key = f"semaphore:{h.prefix}-jobs-lock"
    return {lk["holder"]["session"]: lk for lk in document["locks"] if lk["key"] == key}


def test_semaphore_holder_broken_as_its_release_and_the_library_agrees(
    redis_harness: RedisHarness, holders: Holders, tmp_path: Path
) -> None:
    h, client = redis_harness, redis_harness.client
    key = f"semaphore:{h.prefix}-jobs-lock"
    first, second = holders.ask("take"), holders.ask("take")
    assert first["took"] and second["took"]
    assert holders.ask("take")["took"] is False  # the library's answer: full
    score = client.zscore(key, first["identifier"])
    lock = semaphore_locks(h)[first["identifier"]]
    audit = tmp_path / "audit.jsonl"

    code, out, err = break_cli(h, lock["id"], audit, "--force")
    assert code == 0, err
    assert client.zscore(key, first["identifier"]) is None
    assert client.zscore(key, second["identifier"]) is not None  # the other holder stays
    assert "to put it back: ZADD" in out
    done = audit_records(audit)[-1]
    assert done["event"] == "lock_broken" and done["identifier"] == first["identifier"]
    assert [float(r["score"]) for r in done["removed"]] == [score]
    assert done["members_left"] == 1
    assert "release" in done["effect"]

    # The library's own answers: the broken holder's refresh finds it lost, and
    # an acquirer takes the freed permit.
    assert holders.ask(f"refresh {first['index']}") == {"lost": True, "acquired": False}
    assert holders.ask(f"refresh {second['index']}") == {"lost": False, "acquired": True}
    assert holders.ask("take")["took"] is True


def test_semaphore_break_refused_when_its_holder_refreshed_or_released(
    redis_harness: RedisHarness, holders: Holders, tmp_path: Path
) -> None:
    h, client = redis_harness, redis_harness.client
    key = f"semaphore:{h.prefix}-jobs-lock"
    taken = holders.ask("take 2")  # a MultiSemaphore holder of both permits
    assert taken["took"]
    members = [f"{taken['identifier']}_{i}" for i in (0, 1)]
    lock = semaphore_locks(h)[taken["identifier"]]
    assert lock["semaphore"]["permits"] == 2
    plan = plan_for(h, lock["id"])
    assert all(member in plan.effect for member in members)
    audit = tmp_path / "audit.jsonl"

    # Its holder refreshed since the operator looked (a new score): alive.
    before = client.zscore(key, members[0])
    until(lambda: time.time() * 1000 > (before or 0) + 1, "the clock to pass the score's ms")
    assert holders.ask(f"refresh {taken['index']}") == {"lost": False, "acquired": True}
    assert client.zscore(key, members[0]) != before
    outcome = run(plan, audit)
    assert not outcome.ok and outcome.code == "changed", outcome.message
    assert [client.zscore(key, m) is not None for m in members] == [True, True]

    # As the operator sees it now: both members go.
    outcome = run(plan_for(h, lock["id"]), audit)
    assert outcome.ok, outcome.message
    assert client.exists(key) == 0
    # Gone already: refused, nothing done.
    outcome = run(plan, audit)
    assert not outcome.ok and outcome.code == "gone", outcome.message
