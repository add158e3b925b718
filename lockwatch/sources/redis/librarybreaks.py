"""Breaking a Redisson lock or a redis-semaphore holder: what the library's own
unlock does, as a compare-and-swap in one Lua script, so nothing can come
between the compare and the write.

- Redisson (`RLock.forceUnlock`, redisson/redisson RedissonLock.java and its
  fair and read-write kin): delete the lock's hash, then publish the unlock
  message on its channel, `redisson_lock__channel:{<name>}` (a read-write lock:
  `redisson_rwlock:{<name>}`), so its waiters try at once. The message is 0
  (LockPubSub.UNLOCK_MESSAGE: one waiter wakes), and 1 for a write lock
  (READ_UNLOCK_MESSAGE: all wake). A fair lock (`redisson_lock_queue:{<name>}`
  holds its waiters) first drops the waiters whose wait timed out, then tells
  the first one left on its own channel `<channel>:<waiter>`. Only if the hash
  still holds exactly the fields (owners, their counts, a read-write lock's
  `mode`) the operator saw. Redisson 3.21+ on a Redis 7 cluster with sharded
  pub/sub publishes with SPUBLISH: there a PUBLISH does not reach the waiters,
  which then try when their own wait times out. A read lock's per-reader
  timeout keys are left to expire, as forceUnlock leaves them.
- redis-semaphore (`releaseSemaphore`, swarthy/redis-semaphore): ZREM of the
  holder's member (a MultiSemaphore's: its `<identifier>_<i>` members), only if
  each still has the score the operator saw. Nobody is told (the library
  publishes nothing): acquirers find the permit free at their next attempt.

Neither holder is told its lock went: a Redisson holder's watchdog finds no
field at its next renewal and stops, and its unlock() fails; a semaphore holder's
next refresh finds it gone and calls its onLockLost. So a lock that is not
stale needs its name typed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from lockwatch.model.action import ActionFailed, ActionRefused, Kind, Plan, refused
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.redis.ids import cli_arg
from lockwatch.sources.redis.redisson import REDISSON_RW, RedissonFacts
from lockwatch.sources.redis.semaphore import SemaphoreFacts
from lockwatch.sources.stores.actions import unchanged
from lockwatch.sources.stores.facts import StoreLock

# Redisson's LockPubSub messages.
UNLOCK_MESSAGE = "0"
READ_UNLOCK_MESSAGE = "1"

# KEYS: the lock's hash, a fair lock's queue (list) and its waiters' timeouts (zset).
# ARGV: the channel, the message, now (ms since the epoch), the TTL seen (ms;
# -1: none), then the hash's fields and values as seen. Answers {1, pttl, channel
# published on ('' when none), receivers, {waiter, timeout, ...} dropped} when done; {0} when the
# hash differs; {-2} when its TTL is longer than seen (its watchdog renewed it
# since: the holder is back); {-1} when there is none.
REDISSON_FORCE_UNLOCK = """
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  return {-1}
end
if kind ~= 'hash' or redis.call('HLEN', KEYS[1]) * 2 ~= #ARGV - 4 then
  return {0}
end
for i = 5, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) ~= ARGV[i + 1] then
    return {0}
  end
end
local ttl = redis.call('PTTL', KEYS[1])
local seen = tonumber(ARGV[4])
if seen >= 0 and ttl > seen then
  return {-2}
end
local fair = redis.call('EXISTS', KEYS[2]) == 1
local dropped = {}
while fair do
  local first = redis.call('LINDEX', KEYS[2], 0)
  if not first then
    break
  end
  local timeout = redis.call('ZSCORE', KEYS[3], first)
  if not timeout or tonumber(timeout) > tonumber(ARGV[3]) then
    break
  end
  redis.call('ZREM', KEYS[3], first)
  redis.call('LPOP', KEYS[2])
  table.insert(dropped, first)
  table.insert(dropped, timeout)
end
redis.call('DEL', KEYS[1])
local channel = ARGV[1]
if fair then
  local waiter = redis.call('LINDEX', KEYS[2], 0)
  if not waiter then
    return {1, ttl, '', 0, dropped}
  end
  channel = channel .. ':' .. waiter
end
local receivers = redis.call('PUBLISH', channel, ARGV[2])
return {1, ttl, channel, receivers, dropped}
"""

# KEYS[1]: the semaphore's sorted set. ARGV: the holder's members and their
# scores as seen. Answers {1, members removed, pttl, members left} when done;
# {0, a member that differs, its score now ('' when gone), how many of the
# holder's members are left}.
SEMAPHORE_RELEASE = """
local left = 0
local differs, now = nil, ''
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score then
    left = left + 1
  end
  if not differs and (not score or tonumber(score) ~= tonumber(ARGV[i + 1])) then
    differs, now = ARGV[i], score or ''
  end
end
if differs then
  return {0, differs, now, left}
end
local ttl = redis.call('PTTL', KEYS[1])
local removed = 0
for i = 1, #ARGV, 2 do
  removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
end
return {1, removed, ttl, redis.call('ZCARD', KEYS[1])}
"""


def prefixed(prefix: str, name: str) -> str:
    """Redisson's prefixName: the name in braces (one hash slot with the lock),
    unless it has a hash tag already."""
    return f"{prefix}:{name}" if "{" in name else f"{prefix}:{{{name}}}"


def channel_of(facts: RedissonFacts, fmt: str) -> tuple[str, str]:
    """The channel Redisson's waiters listen on, and the message its forceUnlock sends."""
    if fmt == REDISSON_RW:
        message = READ_UNLOCK_MESSAGE if facts.mode == "write" else UNLOCK_MESSAGE
        return prefixed("redisson_rwlock", facts.key), message
    return prefixed("redisson_lock__channel", facts.key), UNLOCK_MESSAGE


def seen_hash(facts: RedissonFacts) -> list[tuple[str, str]]:
    """The hash's fields and values as the operator saw them."""
    fields = [(owner.field, str(owner.count)) for owner in facts.owners]
    return fields if facts.mode is None else [("mode", facts.mode), *fields]


def plan_redisson(kind: Kind, lock: Lock, verdict: Verdict, facts: RedissonFacts) -> Plan:
    if kind is not Kind.BREAK:
        why = f"a Redisson lock can only be broken (its forceUnlock), not {kind.value}"
        return refused(kind, lock, verdict, "unsupported", why)
    if facts.waiting or not facts.owners:
        why = f"{facts.session} waits for {lock.name}; it holds nothing"
        return refused(kind, lock, verdict, "not_held", why)
    channel, message = channel_of(facts, lock.format)
    fields = ", ".join(f"{field}={value}" for field, value in seen_hash(facts))
    tell = (
        f"tell its first waiter (fair lock: {channel}:<waiter>, after dropping the waiters"
        " whose wait timed out)"
        if facts.blocking
        else f"publish {message} on {channel}"
    )
    effect = (
        f"delete the hash {facts.key} on {facts.server} and {tell}, as Redisson's forceUnlock"
        f" does: one Lua script, only if the hash is still exactly {fields}. Its fields and TTL"
        " go to the audit log so it can be put back by hand. Its holder is not told: its"
        " watchdog stops at the next renewal and its unlock() fails"
    )
    return Plan(
        kind, lock, verdict, "lock_broken", effect, needs_name=verdict.state is not State.STALE
    )


def plan_semaphore(kind: Kind, lock: Lock, verdict: Verdict, facts: SemaphoreFacts) -> Plan:
    if kind is not Kind.BREAK:
        why = f"a redis-semaphore holder can only be broken (its release), not {kind.value}"
        return refused(kind, lock, verdict, "unsupported", why)
    if not facts.entries:
        return refused(kind, lock, verdict, "unsupported", f"{lock.id}: its members were not read")
    if facts.partial:
        why = (
            f"{facts.key} has {facts.members} members and lockwatch read the first"
            f" {len(facts.entries)} of {facts.identifier}'s only: it may hold more past them,"
            " which a break would leave counted; release it with redis-semaphore, or ZREM"
            " every one of its members by hand"
        )
        return refused(kind, lock, verdict, "partial", why)
    members = ", ".join(f"{member} (score {score})" for member, score in facts.entries)
    effect = (
        f"ZREM {members} from {facts.key} on {facts.server}, what redis-semaphore's release"
        " does: one Lua script, only if each still has the score seen (its last acquire or"
        " refresh). Members and scores go to the audit log (a ZADD puts them back). Its holder"
        " is not told: its next refresh finds itself gone (onLockLost); acquirers take the"
        " permit at their next attempt"
    )
    return Plan(
        kind, lock, verdict, "lock_broken", effect, needs_name=verdict.state is not State.STALE
    )


# What a break refuses when the lock is not the one the operator saw (`unchanged`).
_CHANGED = "{key} is not what you saw (sha256 {sha256})"


def _run(
    facts: StoreLock, reach: Mapping[str, Any], script: str, keys: list[str], argv: list[str]
) -> Any:
    import redis

    from lockwatch.sources.redis.endpoint import endpoint_to_act_on
    from lockwatch.sources.redis.server import describe, raw

    endpoint = endpoint_to_act_on(facts.server, reach)
    client = endpoint.connect()
    try:
        return client.eval(script, len(keys), *(raw(v) for v in [*keys, *argv]))
    except (redis.TimeoutError, redis.ConnectionError, OSError) as exc:
        # The script may have run before the answer was lost: never "nothing done".
        message = (
            f"{facts.server}: {describe(exc, endpoint)}; the script may or may not have run:"
            f" look at {facts.key} (lockwatch ls) before acting again"
        )
        raise ActionFailed("unreachable", message) from None
    except redis.RedisError as exc:
        message = f"{facts.server}: {describe(exc, endpoint)}; nothing done"
        raise ActionFailed("unreachable", message) from None
    finally:
        client.close()


def execute_redisson(
    plan: Plan, expect_sha256: str | None, reach: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    from lockwatch.sources.redis.server import redisson_names, text

    lock = plan.lock
    facts = unchanged(lock, RedissonFacts, expect_sha256, _CHANGED)
    channel, message = channel_of(facts, lock.format)
    queue, timeouts = redisson_names(facts.key)
    fields = seen_hash(facts)
    # The TTL as seen: one longer now was renewed since (the watchdog is back).
    seen_ttl = -1 if facts.ttl_left is None else int(facts.ttl_left * 1000)
    argv = [channel, message, str(int(time.time() * 1000)), str(seen_ttl)]
    argv += [part for pair in fields for part in pair]
    answer = _run(facts, reach, REDISSON_FORCE_UNLOCK, [facts.key, queue, timeouts], argv)
    if answer[0] == -1:
        raise ActionRefused("gone", f"{facts.key} is gone (unlocked or expired); nothing done")
    if answer[0] == -2:
        raise ActionRefused(
            "changed",
            f"{facts.key}'s TTL was renewed since you saw it: its holder's watchdog is"
            " running again; nothing done",
        )
    if answer[0] != 1:
        raise ActionRefused(
            "changed",
            f"{facts.key} is no longer the hash you saw (another owner, or its holder locked or"
            " unlocked it again since): nothing done",
        )
    _, ttl, told, receivers, dropped = answer
    told = text(told) if isinstance(told, bytes) else str(told)
    key = cli_arg(facts.key)
    restore = f"HSET {key} " + " ".join(f"{cli_arg(f)} {cli_arg(v)}" for f, v in fields)
    if int(ttl) > 0:
        restore += f"; PEXPIRE {key} {int(ttl)}"
    details: dict[str, Any] = {
        "key": facts.key,
        "previous_hash": dict(fields),
        "ttl_ms": int(ttl),
        "channel": told or None,
        "message": message if told else None,
        "receivers": int(receivers),
        # A fair lock's waiters whose wait had timed out, dropped as Redisson's
        # own unlock drops them: who, and the timeout each had (ms since the epoch).
        "fair_waiters_dropped": len(dropped) // 2,
        "fair_waiters_dropped_ids": [
            {"waiter": text(dropped[i]), "timeout_ms": int(dropped[i + 1])}
            for i in range(0, len(dropped) - 1, 2)
        ],
        "restore": restore,
    }
    said = f"; told {receivers} listener(s) on {told}" if told else ""
    return details, f"deleted {facts.key} on {facts.server}{said}; to put it back: {restore}"


def execute_semaphore(
    plan: Plan, expect_sha256: str | None, reach: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    from lockwatch.sources.redis.server import text

    facts = unchanged(plan.lock, SemaphoreFacts, expect_sha256, _CHANGED)
    argv = [part for pair in facts.entries for part in pair]
    answer = _run(facts, reach, SEMAPHORE_RELEASE, [facts.key], argv)
    if answer[0] != 1:
        _, member, now, left = answer
        member = text(member) if isinstance(member, bytes) else str(member)
        now = text(now) if isinstance(now, bytes) else str(now)
        if int(left) == 0:
            raise ActionRefused(
                "gone",
                f"{facts.identifier} is no longer in {facts.key} (released, or removed as"
                " expired); nothing done",
            )
        raise ActionRefused(
            "changed",
            f"{member} in {facts.key} now has score {now or 'none'}, not the one you saw"
            " (its holder refreshed it: it is alive): nothing done",
        )
    _, removed, ttl, remaining = answer
    restore = f"ZADD {cli_arg(facts.key)} " + " ".join(
        f"{s} {cli_arg(m)}" for m, s in facts.entries
    )
    details: dict[str, Any] = {
        "key": facts.key,
        "identifier": facts.identifier,
        "removed": [{"member": m, "score": s} for m, s in facts.entries],
        "ttl_ms": int(ttl),
        "members_left": int(remaining),
        "restore": restore,
    }
    message = (
        f"removed holder {facts.identifier} ({int(removed)} member{'s' * (int(removed) != 1)})"
        f" from {facts.key} on {facts.server}; to put it back: {restore}"
    )
    return details, message
