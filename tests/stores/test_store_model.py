"""Store locks in the model, without a server: verdicts, the JSON contract, ids,
wait-for graphs, recordings and the records built from a server's answers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model import blocking, codec
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_json
from lockwatch.model.verdict import State, evaluate
from lockwatch.sources import registry
from lockwatch.sources.etcd.gateway import KeyValue, prefix_end
from lockwatch.sources.etcd.ids import etcd_id, parse_etcd
from lockwatch.sources.etcd.records import to_locks as etcd_locks
from lockwatch.sources.etcd.server import EtcdSnapshot
from lockwatch.sources.redis.ids import parse_redis, redis_id
from lockwatch.sources.redis.records import detect, group_locks
from lockwatch.sources.redis.records import to_locks as redis_locks
from lockwatch.sources.redis.server import BlockedClient, RedisKey, RedisSnapshot
from lockwatch.sources.stores.facts import ETCD, REDIS, Quorum, QuorumMember, StoreLock
from tests.conftest import NOW
from tests.facts_of import store_of

SERVER = "10.0.0.5:6379/0"


def judged(lock: Lock, at_seconds: float = 0.0) -> tuple[State, tuple[str, ...]]:
    clock = FrozenClock(NOW + timedelta(seconds=at_seconds))
    verdict = evaluate(lock, StaticProcesses(), clock, "here")
    return verdict.state, verdict.codes


def snapshot(*keys: RedisKey, blocked: tuple[BlockedClient, ...] = ()) -> RedisSnapshot:
    return RedisSnapshot(SERVER, 0, NOW, list(keys), list(blocked))


def test_a_key_with_a_ttl_is_active_until_it_runs_out_then_unknown() -> None:
    (lock,) = redis_locks(snapshot(RedisKey("lock:deploy", "tok", 5000)))
    assert judged(lock) == (State.ACTIVE, ())
    verdict = evaluate(lock, StaticProcesses(), FrozenClock(NOW), "here")
    assert verdict.next_change_at == NOW + timedelta(seconds=5)
    assert lock.expires_at == NOW + timedelta(seconds=5) and lock.ttl_seconds == 5.0
    # Past its TTL and not polled since: nobody knows whether it was renewed.
    assert judged(lock, 6) == (State.UNKNOWN, ("expired",))


def test_a_key_with_no_ttl_is_active_with_a_warning() -> None:
    (lock,) = redis_locks(snapshot(RedisKey("jobs:lock", "tok", -1)))
    assert judged(lock) == (State.ACTIVE, ("no_expiry",))
    assert judged(lock, 10**6) == (State.ACTIVE, ("no_expiry",))
    record = lock_json(lock, evaluate(lock, StaticProcesses(), FrozenClock(NOW), "h"))
    assert record["ttl_seconds"] is None and record["expires_at"] is None
    assert record["ttl_left_seconds"] is None


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lock:nightly", "q1b2c3d4e5f6g7h8i9j0k1l2", ("python-redis-lock", "nightly")),
        ("redlock:billing", "4f7e3d5c-2b1a-4c9d-8e7f-6a5b4c3d2e1f", ("redlock", "billing")),
        # redis-py's token: uuid1().hex up to 8.1, uuid4().hex from 8.2.0.
        ("deploy.lock", "e4e5fd76e7c211f1a4d502fc00000001", ("redis-py", "deploy.lock")),
        ("deploy.lock", "3b0f5e2c9d7a4c1e8f6b2a9d4e7c1f03", ("redis-py", "deploy.lock")),
        # Neither: a version-7 uuid, another variant's uuid4, redis-semaphore's dashed one.
        ("deploy.lock", "e4e5fd76e7c271f1a4d502fc00000001", ("redis", "deploy.lock")),
        ("deploy.lock", "3b0f5e2c9d7a4c1e7f6b2a9d4e7c1f03", ("redis", "deploy.lock")),
        ("deploy.lock", "3b0f5e2c-9d7a-4c1e-8f6b-2a9d4e7c1f03", ("redis", "deploy.lock")),
        ("jobs:lock", "worker-7", ("redis", "jobs:lock")),
    ],
)
def test_formats_by_what_each_library_writes(
    key: str, value: str, expected: tuple[str, str]
) -> None:
    assert detect(key, value) == expected


def test_keys_and_tokens_that_are_not_utf8_round_trip_exactly() -> None:
    key = b"lock:\xff\xfe".decode("utf-8", "surrogateescape")
    value = b"\x80tok".decode("utf-8", "surrogateescape")
    (lock,) = redis_locks(snapshot(RedisKey(key, value, 1000)))
    assert isinstance(lock.facts, StoreLock)
    assert store_of(lock).key.encode("utf-8", "surrogateescape") == b"lock:\xff\xfe"
    record = lock_json(lock, evaluate(lock, StaticProcesses(), FrozenClock(NOW), "h"))
    assert record["key"] == "lock:\\xff\\xfe" and record["id"].endswith(":lock:\\xff\\xfe")
    assert record["token"] == record["holder"]["session"] == "\\x80tok"


def test_waiters_are_matched_by_the_length_of_their_blpop() -> None:
    signal = len("lock-signal:queue")
    fits = BlockedClient(11, "10.0.0.9:5000", "", 0, "blpop", 5 + signal + 2, 4)  # timeout "30"
    other_db = BlockedClient(12, "10.0.0.9:5001", "", 3, "blpop", 5 + signal + 2, 4)
    too_long = BlockedClient(13, "10.0.0.9:5002", "", 0, "blpop", 5 + signal + 40, 4)
    brpop = BlockedClient(14, "10.0.0.9:5003", "", 0, "brpop", 5 + signal + 2, 4)
    locks = redis_locks(
        snapshot(
            RedisKey("lock:queue", "holder-token", 30000),
            blocked=(fits, other_db, too_long, brpop),
        )
    )
    holder, waiter = locks
    assert isinstance(holder.facts, StoreLock) and isinstance(waiter.facts, StoreLock)
    assert store_of(holder).blocking == ("client:11",)
    assert waiter.id == redis_id(SERVER, "lock:queue", 11)
    assert store_of(waiter).blocked_by == ("holder-token",)
    assert waiter.acquired_at == NOW - timedelta(seconds=4)
    assert judged(waiter) == (State.WAITING, ("waiting",))
    assert judged(holder) == (State.ACTIVE, ("blocking",))
    tree = blocking.from_locks(locks)
    (root,) = tree.roots
    assert root.id == "holder-token" and [w.id for w in root.waiters] == ["client:11"]
    assert blocking.group(waiter) == f"redis:{SERVER}"


def quorum_group(*copies: tuple[str, int] | None, down: tuple[int, ...] = ()) -> Lock:
    members: list[tuple[str, RedisSnapshot | None, str | None]] = []
    for number, copy in enumerate(copies):
        server = f"r{number}:6379/0"
        if number in down:
            members.append((server, None, "connection refused"))
            continue
        keys = [] if copy is None else [RedisKey("redlock:job", copy[0], copy[1])]
        members.append((server, RedisSnapshot(server, 0, NOW, keys, []), None))
    (lock,) = group_locks(",".join(m[0] for m in members), members)
    return lock


def test_redlock_quorum_verdicts() -> None:
    held = quorum_group(("a", 9000), ("a", 8000), ("a", 7000))
    assert judged(held) == (State.ACTIVE, ("quorum",))
    # Valid while a majority holds it: until the second-longest copy expires.
    assert held.ttl_seconds == 8.0
    minority = quorum_group(("a", 9000), None, ("b", 7000))
    assert judged(minority) == (State.STALE, ("no_quorum",))
    assert minority.ttl_seconds == 9.0  # its copies block acquirers until the last expires
    unknown = quorum_group(("a", 9000), None, None, down=(2,))
    assert judged(unknown) == (State.UNKNOWN, ("quorum_unknown",))
    majority_despite_one_down = quorum_group(("a", 9000), ("a", 9000), None, down=(2,))
    assert judged(majority_despite_one_down)[0] is State.ACTIVE
    forever = quorum_group(("a", -1), ("a", -1), ("a", 5000))
    assert forever.ttl_seconds is None
    assert judged(forever) == (State.ACTIVE, ("no_expiry", "quorum"))
    assert isinstance(held.facts, StoreLock) and held.facts.quorum is not None
    members = held.facts.quorum.as_json()["members"]
    assert isinstance(members, list)
    assert members[0] == {
        "server": "r0:6379/0",
        "holds": True,
        "token": "a",
        "ttl_seconds": 9.0,
        "error": None,
    }


def kv(key: str, lease: int, create: int, value: str = "") -> KeyValue:
    return KeyValue(key, value, create, create, 1, lease)


def test_etcd_mutex_holder_is_the_lowest_create_revision() -> None:
    snapshot_ = EtcdSnapshot(
        "etcd1:2379",
        NOW,
        42,
        [
            kv("/locks/deploy/2b", 0x2B, 12),
            kv("/locks/deploy/1a", 0x1A, 10),
            kv("/locks/deploy/3c", 0x3C, 11),
            kv("/locks/plain", 0, 5, "someone"),
            kv("/locks/deploy/notalease", 0x4D, 13),  # its name is not its lease
        ],
        {0x1A: (7, 10), 0x2B: (9, 10), 0x3C: (-1, 0), 0x4D: (30, 30)},
    )
    locks = {store_of(lock).key: lock for lock in etcd_locks(snapshot_) if store_of(lock)}
    holder = locks["/locks/deploy/1a"]
    assert isinstance(holder.facts, StoreLock)
    assert (holder.format, holder.name, holder.holder.session) == (
        "etcd-mutex",
        "/locks/deploy",
        "1a",
    )
    assert store_of(holder).blocking == ("3c", "2b")  # in create-revision order
    assert holder.ttl_seconds == 10.0 and holder.expires_at == NOW + timedelta(seconds=7)
    assert judged(holder) == (State.ACTIVE, ("blocking",))
    first, second = locks["/locks/deploy/3c"], locks["/locks/deploy/2b"]
    assert isinstance(first.facts, StoreLock) and isinstance(second.facts, StoreLock)
    assert (store_of(first).position, store_of(second).position) == (1, 2)
    assert store_of(first).blocked_by == store_of(second).blocked_by == ("1a",)
    assert judged(second) == (State.WAITING, ("waiting",))
    plain = locks["/locks/plain"]
    assert (plain.format, plain.holder.session) == ("etcd", "someone")
    assert judged(plain) == (State.ACTIVE, ("no_expiry",))
    assert locks["/locks/deploy/notalease"].format == "etcd"
    record = lock_json(holder, evaluate(holder, StaticProcesses(), FrozenClock(NOW), "h"))
    assert {k: record[k] for k in ("lease", "lease_id", "create_revision", "revision")} == {
        "lease": "1a",
        "lease_id": 0x1A,
        "create_revision": 10,
        "revision": 42,
    }
    tree = blocking.from_locks(locks.values())
    (root,) = tree.roots
    assert root.id == "1a" and root.total == 2


def test_prefix_ends_cover_exactly_the_prefix() -> None:
    import base64

    assert base64.b64decode(prefix_end("/locks/")) == b"/locks0"
    assert (
        base64.b64decode(prefix_end("a\xff".encode("latin-1").decode("utf-8", "surrogateescape")))
        == b"b"
    )


@pytest.mark.parametrize(
    "lock_id",
    [
        redis_id("10.0.0.5:6379/0", "lock:a:b"),
        redis_id("[::1]:6379/2", "x"),
        redis_id("unix:/run/redis.sock/0", "deploy.lock"),
        redis_id("a:1/0,b:2/0,c:3/0", "redlock:job"),
        redis_id("10.0.0.5:6379/0", "lock:q", 12),
    ],
)
def test_redis_ids_parse_back(lock_id: str) -> None:
    parsed = parse_redis(lock_id)
    assert parsed is not None and redis_id(parsed.server, parsed.key) == lock_id
    assert registry.id_prefix(lock_id) == "redis"


def test_etcd_ids_parse_back_and_junk_does_not() -> None:
    lock_id = etcd_id("etcd1:2379", "/locks/deploy/1a")
    parsed = parse_etcd(lock_id)
    assert parsed is not None and (parsed.server, parsed.key) == ("etcd1:2379", "/locks/deploy/1a")
    for junk in ("redis:", "redis:host/0:key", "redis:host:port/0:key", "etcd:host:key"):
        assert parse_redis(junk) is None and parse_etcd(junk) is None


def test_store_locks_survive_a_recording() -> None:
    from lockwatch.sources import recording  # noqa: F401  (registers the record types)

    lock = quorum_group(("a", 9000), None, ("b", 7000), down=())
    waiter = redis_locks(
        snapshot(
            RedisKey("lock:q", "tok", 3000),
            blocked=(BlockedClient(3, "h:1", "n", 0, "blpop", 5 + len("lock-signal:q") + 1, 2),),
        )
    )[1]
    for original in (lock, waiter):
        line = codec.dumps_line(original)
        assert codec.loads_line(line) == original


def test_store_lock_needs_no_holder_pid_and_says_who_holds_it() -> None:
    from lockwatch.model.events import holder_text, waiters

    store = StoreLock(ETCD, "e:2379", "/locks/a/1f", NOW, lease=0x1F, ttl_left=3.0)
    lock = Lock(
        "etcd:e:2379:/locks/a/1f", ETCD, "etcd-mutex", "/locks/a", None, Holder(), facts=store
    )
    assert holder_text(lock) == "lease 1f" and waiters(lock) == 0
    redis_store = StoreLock(
        REDIS,
        "g",
        "redlock:x",
        NOW,
        value="tok",
        quorum=Quorum(3, 2, 0, (QuorumMember("a", True),)),
    )
    assert redis_store.holder_text(lock) == "token tok on 2/3"


def test_the_gateway_finds_v3beta_on_older_etcd_and_reports_non_etcd_answers() -> None:
    import httpx

    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.gateway import Gateway, GatewayError

    asked: list[str] = []

    def etcd_3_3(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if not request.url.path.startswith("/v3beta/"):
            return httpx.Response(404, text="404 page not found")
        return httpx.Response(200, json={"header": {"revision": "7"}, "kvs": []})

    gateway = Gateway(parse("http://old-etcd:2379"), transport=httpx.MockTransport(etcd_3_3))
    assert gateway.range_prefix("/locks/", 10) == (7, [], False)
    assert gateway.range_prefix("/locks/", 10) == (7, [], False)
    assert asked == ["/v3/kv/range", "/v3beta/kv/range", "/v3beta/kv/range"]

    def not_etcd(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>a proxy's login page</html>")

    gateway = Gateway(parse("http://proxy:2379"), transport=httpx.MockTransport(not_etcd))
    with pytest.raises(GatewayError, match="not etcd's JSON gateway"):
        gateway.range_prefix("/locks/", 10)

    def refuses(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": "etcdserver: permission denied", "code": 7})

    gateway = Gateway(parse("http://secured:2379"), transport=httpx.MockTransport(refuses))
    with pytest.raises(GatewayError, match="permission denied"):
        gateway.range_prefix("/locks/", 10)


def test_patterns_sharing_a_run_are_walked_once_and_checked_exactly() -> None:
    from lockwatch.sources.redis.patterns import scan_plan

    ((match, check),) = scan_plan(["lock:*", "redlock:*", "*lock"])
    assert match == "*lock*" and check is not None
    found = [
        b"lock:a",
        b"redlock:b",
        b"deploy.lock",
        b"x:lock",
        b"block:user:1",
        b"clocks",
        b"lock",
        b"lockx",
    ]
    assert [key for key in found if check(key)] == [
        b"lock:a",
        b"redlock:b",
        b"deploy.lock",
        b"x:lock",
        b"lock",
    ]
    # Nothing shared, or classes and escapes: each walked as given.
    assert scan_plan(["lock:*", "mutex:*"]) == [("lock:*", None), ("mutex:*", None)]
    assert scan_plan(["job[12]:lock", "lock:*"]) == [("lock:*", None), ("job[12]:lock", None)]
    ((match, check),) = scan_plan(["app:?:lock", "app:*"])
    assert match == "*app:*" and check is not None
    assert check(b"app:7:lock") and check(b"app:") and not check(b"xapp:1")
