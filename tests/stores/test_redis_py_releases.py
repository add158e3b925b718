"""redis-py's `Lock` as each of its token formats is written, by the real library:
its redis/lock.py and redis/asyncio/lock.py write uuid1().hex from 5.0.0, the
oldest release pyproject claims (`redis>=5.0`), to 8.1.0, and uuid4().hex from
8.2.0 on. The newest is the release constraints.txt pins (the venv's); the oldest
is installed once per machine (tests/installs.py) and takes its locks in a
subprocess that imports it ahead of the venv's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from tests.installs import pip_target
from tests.stores.conftest import WAIT_S, RedisHarness
from tests.stores.test_redis_source import by_key, listing

ROOT = Path(__file__).resolve().parents[2]
OLDEST_CLAIMED = "5.0.0"

# Takes a Lock and an asyncio Lock with the redis-py it imports, and leaves both
# held (the keys' TTL, or the harness's cleanup, ends them).
HOLDER = """
import asyncio, json, sys
import redis
import redis.asyncio

url, sync_key, async_key = sys.argv[1:4]
assert redis.Redis.from_url(url).lock(sync_key, timeout=60).acquire(blocking=False)

async def take():
    client = redis.asyncio.Redis.from_url(url)
    assert await client.lock(async_key, timeout=60).acquire(blocking=False)
    # aclose() from 5.0.1 on; 5.0.0 has close() only.
    await (client.aclose() if hasattr(client, "aclose") else client.close())

asyncio.run(take())
print(json.dumps({"version": redis.__version__, "file": redis.__file__}))
"""


def pinned_release() -> str:
    found = re.search(r"^redis==(\S+)$", (ROOT / "constraints.txt").read_text(), re.MULTILINE)
    assert found, "constraints.txt pins no redis release"
    return found.group(1)


def hold_with(release_path: Path | None, h: RedisHarness, *keys: str) -> dict[str, str]:
    env = dict(os.environ)
    if release_path is not None:
        before = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join([str(release_path), *([before] if before else [])])
    done = subprocess.run(
        [sys.executable, "-c", HOLDER, h.url, *keys],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    taken: dict[str, str] = json.loads(done.stdout)
    return taken


def test_the_oldest_claimed_release_is_pyproject_s_floor() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floor = OLDEST_CLAIMED.rsplit(".", 1)[0]
    assert f"redis>={floor}" in dependencies


@pytest.mark.parametrize(
    ("oldest", "uuid_version"),
    [pytest.param(True, 1, id="oldest-claimed"), pytest.param(False, 4, id="constraints")],
)
def test_each_release_s_lock_token_reads_as_redis_py(
    redis_harness: RedisHarness,
    tmp_path_factory: pytest.TempPathFactory,
    oldest: bool,
    uuid_version: int,
) -> None:
    h = redis_harness
    release = OLDEST_CLAIMED if oldest else pinned_release()
    path = pip_target(tmp_path_factory, f"redis=={release}") if oldest else None
    keys = (f"{h.prefix}:deploy.lock", f"{h.prefix}:async.lock")
    taken = hold_with(path, h, *keys)
    # The release meant, not the venv's by accident (a venv made without -c constraints.txt).
    assert taken["version"] == release, taken
    if path is not None:
        assert Path(taken["file"]).is_relative_to(path)

    locks = by_key(listing(h.url, *h.patterns()))
    assert set(locks) == set(keys)
    for key, lock in locks.items():
        token = h.client.get(key).decode()
        assert uuid.UUID(token).version == uuid_version and token == uuid.UUID(token).hex
        assert (lock["format"], lock["name"], lock["token"]) == ("redis-py", key, token)
        assert (lock["state"], lock["reasons"]) == ("active", [])
