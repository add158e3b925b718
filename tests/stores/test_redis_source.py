"""Redis as a lock source, against the machine's Redis and locks taken by the real
client libraries (redis-py's Lock, python-redis-lock, pottery's Redlock): the
listing matches what Redis itself says about each key."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import redis_lock
from pottery import Redlock

from lockwatch.sources.redis import ids
from tests.conftest import run_cli
from tests.stores.conftest import RedisHarness, Throwaway, until


def server_name(url: str) -> str:
    from lockwatch.sources.redis.endpoint import parse

    return parse(url, {}).name


def listing(url: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    code, out, err = run_cli("ls", "--redis", url, "--json", *args, env=env)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def by_key(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {lock["key"]: lock for lock in document["locks"] if lock["state"] != "waiting"}


def test_locks_of_each_library_as_redis_has_them(redis_harness: RedisHarness) -> None:
    h, client = redis_harness, redis_harness.client
    p = h.prefix
    py_lock = client.lock(f"{p}:deploy.lock", timeout=30)
    assert py_lock.acquire(blocking=False)
    h.cleanups.append(py_lock.release)
    prl = redis_lock.Lock(client, f"{p}-nightly", expire=60)
    assert prl.acquire(blocking=False)
    h.cleanups.append(prl.release)
    redlock = Redlock(key=f"{p}-billing", masters={client}, auto_release_time=20)
    assert redlock.acquire(blocking=False)
    h.cleanups.append(redlock.release)
    client.set(f"{p}:forever:lock", "hand-made")  # no TTL
    client.hset(f"{p}:hash:lock", "a", "b")  # not a string: not a lock
    client.set(f"{p}:unrelated", "x")  # no pattern matches it

    document = listing(h.url, *h.patterns())
    locks = by_key(document)
    assert set(locks) == {
        f"{p}:deploy.lock",
        f"lock:{p}-nightly",
        f"redlock:{p}-billing",
        f"{p}:forever:lock",
    }
    name = server_name(h.url)
    for key, lock in locks.items():
        token = client.get(key).decode()
        pttl = client.pttl(key)
        assert lock["id"] == ids.redis_id(name, key) == f"redis:{name}:{key}"
        assert lock["source"] == "redis" and lock["server"] == name
        assert lock["holder"]["session"] == lock["token"] == token
        if pttl < 0:
            assert lock["ttl_seconds"] is None and lock["expires_at"] is None
        else:
            # Remaining at the poll: no more than Redis says now plus the time between.
            assert pttl / 1000 <= lock["ttl_seconds"] <= pttl / 1000 + 5
            assert lock["expires_at"] is not None
    formats = {key: (lock["format"], lock["name"]) for key, lock in locks.items()}
    assert formats == {
        f"{p}:deploy.lock": ("redis-py", f"{p}:deploy.lock"),
        f"lock:{p}-nightly": ("python-redis-lock", f"{p}-nightly"),
        f"redlock:{p}-billing": ("redlock", f"{p}-billing"),
        f"{p}:forever:lock": ("redis", f"{p}:forever:lock"),
    }
    states = {
        key: (lock["state"], [r["code"] for r in lock["reasons"]]) for key, lock in locks.items()
    }
    assert states[f"{p}:forever:lock"] == ("active", ["no_expiry"])
    assert states[f"{p}:deploy.lock"] == ("active", [])
    # python-redis-lock without an expiry never expires either.
    forever = redis_lock.Lock(client, f"{p}-noexpire")
    assert forever.acquire(blocking=False)
    h.cleanups.append(forever.release)
    again = by_key(listing(h.url, *h.patterns()))
    assert [r["code"] for r in again[f"lock:{p}-noexpire"]["reasons"]] == ["no_expiry"]


def test_default_patterns_find_every_library_s_keys(redis_harness: RedisHarness) -> None:
    h, client = redis_harness, redis_harness.client
    p = h.prefix
    for key in (f"lock:{p}", f"redlock:{p}", f"{p}lock", f"{p}.lock", f"{p}:lock"):
        client.set(key, "t", ex=60)
    client.set(f"{p}:locker", "t", ex=60)  # does not end in lock
    document = listing(h.url)
    mine = {lock["key"] for lock in document["locks"] if p in lock["key"]}
    assert mine == {f"lock:{p}", f"redlock:{p}", f"{p}lock", f"{p}.lock", f"{p}:lock"}


def start_waiter(h: RedisHarness, name: str) -> tuple[threading.Thread, list[bool]]:
    """A python-redis-lock client waiting for `name` (blocked in BLPOP) in a thread."""
    got: list[bool] = []
    client = h.new_client()
    before = sum(c.get("cmd") == "blpop" for c in h.client.client_list(_type="normal"))

    def wait() -> None:
        got.append(redis_lock.Lock(client, name, expire=30).acquire(timeout=8))

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    until(
        lambda: sum(c.get("cmd") == "blpop" for c in h.client.client_list(_type="normal")) > before,
        "the waiter to block",
    )
    return thread, got


def test_python_redis_lock_waiters_hang_under_their_holder(redis_harness: RedisHarness) -> None:
    h = redis_harness
    p = h.prefix
    held = redis_lock.Lock(h.client, f"{p}-queue", expire=30)
    assert held.acquire(blocking=False)
    # Another held lock, whose name is much longer: its waiters would block with
    # longer arguments, so this waiter cannot be its.
    other = redis_lock.Lock(h.client, f"{p}-another-lock-with-a-long-name", expire=30)
    assert other.acquire(blocking=False)
    h.cleanups.append(other.release)
    thread, got = start_waiter(h, f"{p}-queue")

    document = listing(h.url, *h.patterns())
    (waiter,) = [lock for lock in document["locks"] if lock["state"] == "waiting"]
    holder = by_key(document)[f"lock:{p}-queue"]
    blocked = next(c for c in h.client.client_list(_type="normal") if c.get("cmd") == "blpop")
    assert waiter["key"] == f"lock:{p}-queue" and waiter["name"] == f"{p}-queue"
    assert waiter["format"] == "python-redis-lock"
    assert waiter["client"]["id"] == int(blocked["id"])
    assert waiter["holder"]["session"] == f"client:{blocked['id']}"
    assert waiter["blocked_by"] == [holder["token"]]
    assert waiter["id"] == ids.redis_id(server_name(h.url), f"lock:{p}-queue", int(blocked["id"]))
    assert [r["code"] for r in waiter["reasons"]] == ["waiting"]
    assert holder["blocking"] == [f"client:{blocked['id']}"]
    assert [r["code"] for r in holder["reasons"]] == ["blocking"]
    assert by_key(document)[f"lock:{p}-another-lock-with-a-long-name"]["blocking"] == []
    (tree,) = [t for t in document["blocking"] if t["server"] == f"redis:{server_name(h.url)}"]
    (root,) = [r for r in tree["roots"] if r["id"] == holder["token"]]
    assert [w["id"] for w in root["waiters"]] == [f"client:{blocked['id']}"]

    held.release()
    thread.join(timeout=10)
    assert got == [True]


def test_a_waiter_two_locks_could_own_is_not_given_to_either(redis_harness: RedisHarness) -> None:
    """Redis does not say which key a client waits on: with two held locks whose
    names are alike in length, lockwatch cannot tell, so it shows no waiter
    rather than the wrong one."""
    h = redis_harness
    p = h.prefix
    first = redis_lock.Lock(h.client, f"{p}-aaaa", expire=30)
    second = redis_lock.Lock(h.client, f"{p}-bbbb", expire=30)
    assert first.acquire(blocking=False) and second.acquire(blocking=False)
    h.cleanups.append(second.release)
    thread, got = start_waiter(h, f"{p}-aaaa")
    document = listing(h.url, *h.patterns())
    assert [lock for lock in document["locks"] if lock["state"] == "waiting"] == []
    assert all(lock["blocking"] == [] for lock in document["locks"])
    first.release()
    thread.join(timeout=10)
    assert got == [True]


def test_a_waiter_on_an_unrelated_list_is_not_taken_for_a_lock_waiter(
    redis_harness: RedisHarness,
) -> None:
    h = redis_harness
    held = redis_lock.Lock(h.client, f"{h.prefix}-solo", expire=30)
    assert held.acquire(blocking=False)
    h.cleanups.append(held.release)
    worker = h.new_client()
    # Its key is far longer than the lock's signal list: its BLPOP cannot be that one.
    queue = f"{h.prefix}:jobs:queue:for:the:nightly:report:workers"
    thread = threading.Thread(target=lambda: worker.blpop([queue], timeout=3), daemon=True)
    thread.start()
    until(
        lambda: any(c.get("cmd") == "blpop" for c in h.client.client_list(_type="normal")),
        "the worker to block",
    )
    document = listing(h.url, *h.patterns())
    assert [lock for lock in document["locks"] if lock["state"] == "waiting"] == []
    h.client.lpush(queue, 1)
    thread.join(timeout=5)


def test_passwords_from_the_url_the_environment_or_a_file_are_never_shown(
    throwaway_redis: Any, tmp_path: Any
) -> None:
    secret = "pa55-w0rd-xyz"
    server: Throwaway = throwaway_redis("--requirepass", secret)
    bare = f"redis://127.0.0.1:{server.port}/0"
    with_password = f"redis://:{secret}@127.0.0.1:{server.port}/0"
    import redis

    redis.Redis.from_url(with_password).set("build:lock", "tok", ex=60)

    code, out, err = run_cli("ls", "--redis", with_password, "--json")
    assert code == 0, err
    assert secret not in out + err
    assert [lock["key"] for lock in json.loads(out)["locks"]] == ["build:lock"]

    code, out, err = run_cli("ls", "--redis", bare, "--json", env={"REDISCLI_AUTH": secret})
    assert code == 0 and json.loads(out)["locks"], err

    password_file = tmp_path / "redis-password"
    password_file.write_text(secret + "\n")
    config = tmp_path / "lockwatch.toml"
    config.write_text(f'[redis]\nurl = "{bare}"\npassword_file = "{password_file}"\n')
    code, out, err = run_cli("ls", "--config", str(config), "--json", "--redis", bare)
    assert code == 0 and json.loads(out)["locks"], err

    # A wrong password: reported (exit 1), never echoed.
    wrong = f"redis://:not-{secret}@127.0.0.1:{server.port}/0"
    code, out, err = run_cli("ls", "--redis", wrong, "--json")
    assert code == 1
    assert secret not in out + err
    (source,) = json.loads(out)["sources"]
    assert source["status"] == "error" and source["name"] == f"127.0.0.1:{server.port}/0"
    assert "password" in (source["reason"] or "").lower()

    code, _, err = run_cli("ls", "--redis", bare, env={"REDISCLI_AUTH": ""})
    assert code == 1 and "Authentication required" in err and "REDISCLI_AUTH" in err, err


def test_a_server_that_is_away_is_reported_with_a_retry() -> None:
    from tests.stores.conftest import free_port

    url = f"redis://:hunter2@127.0.0.1:{free_port()}/2"
    code, out, err = run_cli("ls", "--redis", url, "--json")
    assert code == 1
    (source,) = json.loads(out)["sources"]
    assert source["kind"] == "redis" and source["status"] == "disconnected"
    assert source["next_retry_at"] is not None
    assert "hunter2" not in out + err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://cache:6379", "redis://, rediss:// or unix://"),
        ("redis://:s3cret@cache:notaport/0", "not a usable URL"),
        ("redis://:s3cret@cache:6379/zero", "database must be a number"),
        ("unix://relative.sock", "absolute socket path"),
        ("redis://", "no host"),
    ],
)
def test_bad_redis_urls_are_usage_errors_without_their_secrets(url: str, message: str) -> None:
    code, _, err = run_cli("ls", "--redis", url)
    assert code == 2 and message in err, err
    assert "s3cret" not in err


def test_an_unreadable_password_file_is_a_usage_error(tmp_path: Any) -> None:
    config = tmp_path / "lockwatch.toml"
    config.write_text('[redis]\nurl = "redis://127.0.0.1:1/0"\npassword_file = "/nonexistent/pw"\n')
    code, _, err = run_cli("ls", "--config", str(config))
    assert code == 2 and "password_file" in err


def test_a_server_on_a_unix_socket_is_named_by_its_socket(
    throwaway_redis: Any, tmp_path: Any
) -> None:
    import redis

    socket_path = tmp_path / "redis.sock"
    throwaway_redis("--unixsocket", str(socket_path), "--unixsocketperm", "700")
    client = redis.Redis(unix_socket_path=str(socket_path), db=3)
    client.set("deploy.lock", "tok", ex=60)
    code, out, err = run_cli("ls", "--redis", f"unix://{socket_path}?db=3", "--json")
    assert code == 0, err
    (lock,) = json.loads(out)["locks"]
    assert lock["server"] == f"unix:{socket_path}/3"
    assert lock["id"] == f"redis:unix:{socket_path}/3:deploy.lock"
    # The id alone is enough to find it again (no --redis): the socket is in it.
    code, _, err = run_cli(
        "break", lock["id"], "--reason", "test", "--yes", "--force",
        "--audit-log", str(tmp_path / "audit.jsonl"),
    )  # fmt: skip
    assert code == 0, err
    assert client.exists("deploy.lock") == 0
