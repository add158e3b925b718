"""Breaking a Redis lock against the real server: one Lua compare-and-delete on the
token the operator saw, audited with what would put it back."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis_lock

from lockwatch.actions.audit import AuditLog, Operator
from lockwatch.actions.plan import Kind
from lockwatch.actions.run import Executor
from lockwatch.actions.targets import find, prepare
from lockwatch.clock import SystemClock
from lockwatch.config import Config
from lockwatch.sources.contract import Wanted
from lockwatch.sources.redis import ids
from tests.conftest import run_cli
from tests.formats.common import need_tools
from tests.stores.conftest import RedisHarness, Throwaway


def lock_id(h: RedisHarness, key: str) -> str:
    from lockwatch.sources.redis.endpoint import parse

    return ids.redis_id(parse(h.url, {}).name, key)


def audit_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def break_cli(h: RedisHarness, target: str, audit: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(
        "break", target, "--redis", h.url, "--reason", "holder died, INC-7", "--yes",
        "--audit-log", str(audit), *extra,
    )  # fmt: skip


def test_break_deletes_the_key_and_audits_value_token_and_ttl(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    h = redis_harness
    py_lock = h.client.lock(f"{h.prefix}:deploy.lock", timeout=120)
    assert py_lock.acquire(blocking=False)
    key = f"{h.prefix}:deploy.lock"
    token = h.client.get(key).decode()
    audit = tmp_path / "audit.jsonl"

    # Active: only with the typed name (--force).
    code, _, err = break_cli(h, lock_id(h, key), audit)
    assert code == 1 and "--force" in err
    assert h.client.get(key) is not None

    code, out, err = break_cli(h, lock_id(h, key), audit, "--force")
    assert code == 0, err
    assert h.client.exists(key) == 0
    assert "to put it back: SET" in out
    records = audit_records(audit)
    assert [r["event"] for r in records] == [
        "action_refused",
        "action_intent",
        "lock_broken",
    ]
    done = records[-1]
    assert done["target"] == {
        "source": "redis",
        "id": lock_id(h, key),
        "name": key,
        "format": "redis-py",
        "server": lock_id(h, "").removeprefix("redis:")[:-1],
        "key": key,
    }
    assert done["previous_lock"]["value"] == token
    assert 0 < done["previous_lock"]["pttl_ms"] <= 120_000
    (deleted,) = done["deleted"]
    assert deleted["previous_value"] == deleted["token"] == token
    assert 0 < deleted["ttl_ms"] <= 120_000
    assert deleted["restore"].startswith(f"SET '{key}' '{token}' PX ")
    # What the operator's confirmation compared: the token's bytes.
    assert done["previous_lock_hash"] == "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def test_break_is_refused_when_the_token_changed_or_the_key_is_gone(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    """The operator saw one holder's token; another holder took the lock before
    the break ran: its key stays."""
    h = redis_harness
    key = f"lock:{h.prefix}-cas"
    first = redis_lock.Lock(h.client, f"{h.prefix}-cas", expire=60)
    assert first.acquire(blocking=False)
    wanted = Wanted((), {"redis_urls": (h.url,)}, Config(), {})
    found = find(lock_id(h, key), wanted, "host")
    assert not isinstance(found, str)
    lock, verdict, peers = found
    plan = prepare(Kind.BREAK, lock, verdict, peers=peers)
    assert plan.refusal is None and "only if it still holds token" in plan.effect

    first.release()
    second = redis_lock.Lock(h.client, f"{h.prefix}-cas", expire=60)
    assert second.acquire(blocking=False)
    h.cleanups.append(second.release)

    operator = Operator("op", "op", None)
    log = AuditLog(tmp_path / "audit.jsonl", clock=SystemClock(), host="h", operator=operator)
    outcome = Executor(log).run(plan, "stale, INC-8", force=True)
    assert not outcome.ok and outcome.code == "changed", outcome.message
    assert h.client.get(key).decode() == second.id
    assert second.id in outcome.message

    second.release()
    h.cleanups.remove(second.release)
    outcome = Executor(log).run(plan, "stale, INC-8", force=True)
    assert not outcome.ok and outcome.code == "gone"
    events = [r["event"] for r in audit_records(tmp_path / "audit.jsonl")]
    assert events == ["action_intent", "action_refused", "action_intent", "action_refused"]


def test_expect_sha256_is_what_the_operator_saw(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    h = redis_harness
    key = f"{h.prefix}:report:lock"
    h.client.set(key, "token-one", ex=60)
    code, out, _ = run_cli("ls", "--redis", h.url, "--json", *h.patterns())
    (listed,) = json.loads(out)["locks"]
    h.client.set(key, "token-two", ex=60)  # a new holder since the listing
    code, _, err = break_cli(
        h, listed["id"], tmp_path / "a.jsonl", "--force", "--expect-sha256", listed["sha256"]
    )
    assert code == 1 and "another token" in err
    assert h.client.get(key) == b"token-two"


def test_waiters_and_other_actions_are_refused(redis_harness: RedisHarness, tmp_path: Path) -> None:
    h = redis_harness
    key = f"{h.prefix}:thing.lock"
    h.client.set(key, "t", ex=60)
    for command in ("steal", "release", "cancel"):
        code, _, err = run_cli(
            command, lock_id(h, key), "--redis", h.url, "--reason", "x", "--yes",
            "--audit-log", str(tmp_path / "a.jsonl"),
        )  # fmt: skip
        assert code == 1 and "redis locks offer break" in err, (command, err)
    assert h.client.get(key) == b"t"


def test_read_only_refuses_before_touching_anything(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    h = redis_harness
    key = f"{h.prefix}:ro.lock"
    h.client.set(key, "t")
    code, _, err = run_cli(
        "--readonly", "break", lock_id(h, key), "--redis", h.url, "--reason", "x", "--yes",
        "--force",
    )  # fmt: skip
    assert code == 2 and "read-only" in err
    assert h.client.get(key) == b"t"


@pytest.mark.parametrize("target", ["redis:nohost:0:key", "redis:127.0.0.1:6379:key"])
def test_a_malformed_redis_id_is_a_usage_error(target: str) -> None:
    code, _, err = run_cli("break", target, "--reason", "x", "--yes")
    assert code == 2 and "not a Redis lock id" in err


def test_the_dashboard_s_action_session_breaks_a_store_lock_too(
    throwaway_redis: Callable[..., Throwaway], tmp_path: Path
) -> None:
    """The dashboard's `b`: the same plan and compare-and-delete, through the action
    session, to the server the dashboard was told about: its password is only in
    the --redis URL, and the session reaches it as `lockwatch break --redis` does
    (`lockwatch.actions.reach`), with nothing remembered by the Redis source."""
    import redis

    from lockwatch.cli.watch import build_app
    from lockwatch.cli.where import select_targets

    server = throwaway_redis("--requirepass", "dash-pw")
    url = f"redis://:dash-pw@127.0.0.1:{server.port}/0"
    client = redis.Redis(port=server.port, password="dash-pw")
    client.set("dash.lock", "tok-dash", ex=60)
    targets = select_targets({"redis_urls": (url,), "redis_patterns": ("*",)}, Config(), {})
    app = build_app(
        targets, host="host", audit_log=tmp_path / "audit.jsonl", feeds=(SystemClock(), [])
    )
    session = app.actions
    assert session is not None
    assert targets.wanted is not None
    found = find(f"redis:127.0.0.1:{server.port}/0:dash.lock", targets.wanted, "host")
    assert not isinstance(found, str)
    lock, verdict, peers = found
    plan = session.plan(Kind.BREAK, lock, verdict, peers)
    assert plan.needs_name and plan.refusal is None
    outcome = session.run(plan, "dashboard break", force=True)
    assert outcome.ok, outcome.message
    assert client.exists("dash.lock") == 0
    client.close()


def test_ls_table_names_store_locks_and_their_server(redis_harness: RedisHarness) -> None:
    h = redis_harness
    h.client.set(f"{h.prefix}:table:lock", "who-holds-it")
    code, out, _ = run_cli("ls", "--redis", h.url, "-l", *h.patterns())
    assert code == 0
    header, row, reason, summary = out.splitlines()
    assert header.split() == ["STATE", "FORMAT", "NAME", "HOLDER", "AGE", "REASONS", "WHERE"]
    assert row.split()[:3] == ["active", "redis", f"{h.prefix}:table:lock"]
    assert "token who-holds-it" in row and f"{h.prefix}:table:lock" in row.split()[-1]
    assert reason.strip().startswith("no_expiry: the key has no TTL")
    assert summary == "1 lock: 1 active"


def test_the_restore_of_a_key_with_bytes_puts_back_that_key(
    redis_harness: RedisHarness, tmp_path: Path
) -> None:
    """Issue 47 item 16's family: the restore told for a key holding a byte that is
    not UTF-8 (`\\xff`) was Python's repr (`'lock:…\\udcff'`): redis-cli, given it,
    made a key of those six characters. Given to the real redis-cli, the restore
    now puts back the very key and token that were deleted."""
    need_tools("redis-cli")
    h = redis_harness
    key = f"lock:{h.prefix}:coll".encode() + b"\xff \"q\" 'a'\\"
    token = b"tok\xfe\n1"
    h.client.set(key, token)
    audit = tmp_path / "audit.jsonl"
    code, _, err = break_cli(
        h, lock_id(h, key.decode("utf-8", "surrogateescape")), audit, "--force"
    )
    assert code == 0, err
    assert h.client.exists(key) == 0
    (deleted,) = audit_records(audit)[-1]["deleted"]
    done = subprocess.run(
        ["redis-cli", "-u", h.url],
        input=deleted["restore"] + "\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "OK" in done.stdout, (deleted["restore"], done.stdout, done.stderr)
    assert h.client.get(key) == token
