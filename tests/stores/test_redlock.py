"""Redlock groups, against three throwaway redis-servers and pottery's Redlock:
each lock shown once, with how many servers hold it with the same token."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from pottery import Redlock

from lockwatch.sources.redis import ids
from tests.conftest import run_cli
from tests.stores.conftest import Throwaway, until


@pytest.fixture
def group(redlock_servers: list[Throwaway]) -> Iterator[list[redis.Redis]]:
    clients = [redis.Redis.from_url(server.url) for server in redlock_servers]
    try:
        yield clients
    finally:
        for client in clients:
            client.flushdb()
            client.close()


def acquired_everywhere(lock: Redlock, group: list[redis.Redis], key: str) -> bytes:
    """pottery returns once a majority holds the lock; its other SETs may still be
    on their way: wait for every server's copy, and answer the token."""
    assert lock.acquire(blocking=False)
    until(lambda: all(client.get(key) for client in group), "every server's copy")
    token = group[0].get(key)
    assert isinstance(token, bytes)
    return token


def urls(servers: list[Throwaway]) -> str:
    return ",".join(server.url for server in servers)


def names(servers: list[Throwaway]) -> str:
    return ",".join(f"127.0.0.1:{server.port}/0" for server in servers)


def listing(servers: list[Throwaway], *args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli("ls", "--redlock", urls(servers), "--json", *args)
    return code, json.loads(out), err


def test_a_redlock_held_by_every_server_is_shown_once_and_active(
    redlock_servers: list[Throwaway], group: list[redis.Redis]
) -> None:
    name = f"deploy-{uuid.uuid4().hex[:6]}"
    lock = Redlock(key=name, masters=set(group), auto_release_time=30)
    token = acquired_everywhere(lock, group, f"redlock:{name}").decode()
    code, document, err = listing(redlock_servers)
    assert code == 0, err
    (found,) = document["locks"]
    assert found["id"] == ids.redis_id(names(redlock_servers), f"redlock:{name}")
    assert (found["format"], found["name"], found["state"]) == ("redlock", name, "active")
    assert found["holder"]["session"] == found["token"] == token
    quorum = found["quorum"]
    assert (quorum["servers"], quorum["holding"], quorum["needed"], quorum["unknown"]) == (
        3,
        3,
        2,
        0,
    )
    assert [m["holds"] for m in quorum["members"]] == [True, True, True]
    assert [r["code"] for r in found["reasons"]] == ["quorum"]
    assert 25 < found["ttl_seconds"] <= 30
    assert {s["name"] for s in document["sources"]} == {
        f"127.0.0.1:{s.port}/0" for s in redlock_servers
    }
    lock.release()


def test_no_majority_is_stale_no_quorum_and_one_server_away_is_unknown(
    redlock_servers: list[Throwaway], group: list[redis.Redis]
) -> None:
    name = f"billing-{uuid.uuid4().hex[:6]}"
    lock = Redlock(key=name, masters=set(group), auto_release_time=30)
    key = f"redlock:{name}"
    acquired_everywhere(lock, group, key)
    group[1].delete(key)
    code, document, _ = listing(redlock_servers)
    (found,) = document["locks"]
    assert found["state"] == "active" and found["quorum"]["holding"] == 2  # still a majority

    group[2].delete(key)  # one copy left: nobody holds it, yet it blocks acquirers
    code, document, _ = listing(redlock_servers, "--fail-on-stale")
    assert code == 3
    (found,) = document["locks"]
    assert found["state"] == "stale"
    assert [r["code"] for r in found["reasons"]] == ["no_quorum"]
    assert [m["holds"] for m in found["quorum"]["members"]] == [True, False, False]

    # A copy on the first server, the second's copy taken by another token, the
    # third unreachable: 1 of 3 hold it and 1 cannot be asked, so nobody can tell.
    group[1].set(key, "someone-else", px=30000)
    down = [*redlock_servers[:2], _dead_server()]
    code, stdout, _ = run_cli("ls", "--redlock", urls(down), "--json")
    assert code == 1  # a server could not be polled
    (found,) = json.loads(stdout)["locks"]
    assert found["state"] == "unknown"
    assert [r["code"] for r in found["reasons"]] == ["quorum_unknown"]
    assert [m["holds"] for m in found["quorum"]["members"]] == [True, False, None]


def _dead_server() -> Throwaway:
    from tests.stores.conftest import free_port

    port = free_port()
    return Throwaway(process=None, port=port, url=f"redis://127.0.0.1:{port}/0", workdir="")  # type: ignore[arg-type]


def test_break_deletes_every_copy_with_the_token_and_leaves_others(
    redlock_servers: list[Throwaway], group: list[redis.Redis], tmp_path: Path
) -> None:
    name = f"stuck-{uuid.uuid4().hex[:6]}"
    key = f"redlock:{name}"
    lock = Redlock(key=name, masters=set(group), auto_release_time=60)
    token = acquired_everywhere(lock, group, key)
    group[1].delete(key)
    group[2].delete(key)
    # Another holder's copy: a tie of one copy each, shown by the smaller token.
    group[2].set(key, "zz-another-holder", px=60000)
    code, document, _ = listing(redlock_servers)
    (found,) = document["locks"]
    assert found["state"] == "stale" and found["token"] == token.decode()
    audit = tmp_path / "audit.jsonl"
    code, _, err = run_cli(
        "break", found["id"], "--redis", redlock_servers[0].url, "--reason", "orphaned",
        "--yes", "--audit-log", str(audit),
    )  # fmt: skip
    assert code == 0, err
    assert group[0].get(key) is None
    assert group[2].get(key) == b"zz-another-holder"
    done = json.loads(audit.read_text().splitlines()[-1])
    assert done["event"] == "lock_broken"
    assert [d["server"] for d in done["deleted"]] == [f"127.0.0.1:{redlock_servers[0].port}/0"]
    assert done["deleted"][0]["previous_value"] == token.decode() == done["token"]
    assert {u["value"] for u in done["untouched"]} == {None, "zz-another-holder"}


def test_redlock_groups_from_the_config(
    redlock_servers: list[Throwaway], group: list[redis.Redis], tmp_path: Path
) -> None:
    name = f"cfg-{uuid.uuid4().hex[:6]}"
    group[0].set(f"redlock:{name}", "tok", px=30000)
    group[1].set(f"redlock:{name}", "tok", px=30000)
    config = tmp_path / "lockwatch.toml"
    servers = ", ".join(f'"{server.url}"' for server in redlock_servers)
    config.write_text(f"[redis]\nredlock = [{servers}]\n")
    code, out, err = run_cli("ls", "--config", str(config), "--json", str(tmp_path))
    assert code == 0, err
    (found,) = [lock for lock in json.loads(out)["locks"] if lock["source"] == "redis"]
    assert found["state"] == "active" and found["quorum"]["holding"] == 2


def test_a_group_needs_two_servers(tmp_path: Path) -> None:
    code, _, err = run_cli("ls", "--redlock", "redis://127.0.0.1:1/0")
    assert code == 2 and "comma-separated" in err
    config = tmp_path / "lockwatch.toml"
    config.write_text('[redis]\nredlock = ["redis://127.0.0.1:1/0"]\n')
    code, _, err = run_cli("ls", "--config", str(config))
    assert code == 2 and "at least two servers" in err
