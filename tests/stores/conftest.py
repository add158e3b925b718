"""Redis and etcd for the store tests: real servers, real client libraries.

- Redis: the machine's server at 127.0.0.1:6379 (LOCKWATCH_TEST_REDIS_URL to use
  another), in database 13, every test under its own key prefix, cleaned up.
- Throwaway servers: `redis-server` and `etcd` processes on free loopback ports
  (Redlock groups, a server with a password, a server that goes away, etcd),
  killed at teardown.

Without a server the tests skip with the reason, or fail with it when
LOCKWATCH_REQUIRE_PG=1 (CI): a test that needs a server never passes without one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pytest

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"
# Every wait is bounded by this; healthy runs need a fraction of it.
WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("LOCKWATCH_REQUIRE_PG") == "1":
        pytest.fail(f"LOCKWATCH_REQUIRE_PG=1 but {reason}")
    pytest.skip(reason)


def until(condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Wait for `condition()` to be truthy (a bounded poll, never a blind sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------------------ Redis


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    url = os.environ.get("LOCKWATCH_TEST_REDIS_URL") or DEFAULT_REDIS_URL
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except (redis.RedisError, OSError) as exc:
        unavailable(f"no Redis server at {url}: {exc}")
    return url


@dataclass
class RedisHarness:
    """One test's corner of a Redis server: a unique prefix, the clients it made,
    the keys it wrote (deleted at teardown), the holders it started."""

    url: str
    prefix: str
    client: Any
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def patterns(self) -> list[str]:
        """--redis-pattern flags that find this test's keys only, with the
        default patterns' shapes (lock:*, redlock:*, names ending in lock)."""
        return [
            flag
            for pattern in (
                f"lock:{self.prefix}*",
                f"redlock:{self.prefix}*",
                f"{self.prefix}*lock",
            )
            for flag in ("--redis-pattern", pattern)
        ]

    def new_client(self) -> Any:
        import redis

        client = redis.Redis.from_url(self.url)
        self.cleanups.append(client.close)
        return client

    def delete_mine(self) -> None:
        for pattern in (f"*{self.prefix}*",):
            for key in self.client.scan_iter(match=pattern, count=1000):
                self.client.delete(key)


@pytest.fixture
def redis_harness(redis_url: str) -> Iterator[RedisHarness]:
    import redis

    client = redis.Redis.from_url(redis_url)
    harness = RedisHarness(redis_url, f"lwt{uuid.uuid4().hex[:10]}", client)
    try:
        yield harness
    finally:
        for cleanup in reversed(harness.cleanups):
            with contextlib.suppress(Exception):
                cleanup()
        harness.delete_mine()
        client.close()


@dataclass
class Throwaway:
    process: subprocess.Popen[bytes]
    port: int
    url: str
    workdir: str

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=WAIT_S)


def start_redis(*extra: str) -> Throwaway:
    """A redis-server of our own on a free loopback port, nothing saved to disk."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server is not installed (apt-get install redis-server)")
    import redis

    port = free_port()
    workdir = tempfile.mkdtemp(prefix="lw-redis-")
    process = subprocess.Popen(
        [
            *(binary, "--port", str(port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", workdir, *extra),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = Throwaway(process, port, f"redis://127.0.0.1:{port}/0", workdir)
    password = extra[extra.index("--requirepass") + 1] if "--requirepass" in extra else None

    def answers() -> bool:
        try:
            return bool(
                redis.Redis(port=port, password=password, socket_connect_timeout=0.5).ping()
            )
        except (redis.RedisError, OSError):
            if process.poll() is not None:
                raise AssertionError("redis-server exited at start") from None
            return False

    until(answers, f"redis-server on port {port}")
    return server


@pytest.fixture(scope="session")
def redlock_servers() -> Iterator[list[Throwaway]]:
    servers = [start_redis() for _ in range(3)]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()
            shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.fixture
def throwaway_redis() -> Iterator[Callable[..., Throwaway]]:
    started: list[Throwaway] = []

    def start(*extra: str) -> Throwaway:
        server = start_redis(*extra)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()
            shutil.rmtree(server.workdir, ignore_errors=True)


# ------------------------------------------------------------------------------- etcd


@dataclass
class Etcd:
    url: str
    process: subprocess.Popen[bytes]
    workdir: str
    holders: list[subprocess.Popen[str]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {**os.environ, "ETCDCTL_API": "3"}

    def ctl(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(
            ["etcdctl", "--endpoints", self.url, *args],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=WAIT_S,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"etcdctl {' '.join(args)}: {done.stderr}")
        return done.stdout

    def lock(self, name: str, *, ttl: int = 10) -> subprocess.Popen[str]:
        """`etcdctl lock NAME` in the background: it holds the lock (or waits for
        it) until killed. A holder prints its key once it has the lock."""
        process = subprocess.Popen(
            ["etcdctl", "--endpoints", self.url, "lock", f"--ttl={ttl}", name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env(),
        )
        self.holders.append(process)
        return process

    def keys(self, prefix: str) -> list[str]:
        return [line for line in self.ctl("get", "--prefix", "--keys-only", prefix).split() if line]

    def stop_holders(self) -> None:
        for process in self.holders:
            if process.poll() is None:
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.communicate(timeout=WAIT_S)
        self.holders.clear()


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[Etcd]:
    binary, ctl = shutil.which("etcd"), shutil.which("etcdctl")
    if binary is None or ctl is None:
        unavailable("etcd is not installed (apt-get install etcd-server etcd-client)")
    import httpx

    workdir = tempfile.mkdtemp(prefix="lw-etcd-")
    client_port, peer_port = free_port(), free_port()
    url = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    process = subprocess.Popen(
        [
            binary,
            "--name=lw",
            f"--data-dir={workdir}/data",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=lw={peer}",
            "--log-level=error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError("etcd exited at start")
        try:
            health: object = httpx.get(f"{url}/health", timeout=0.5).json().get("health")
            return health == "true"
        except (httpx.HTTPError, ValueError):
            return False

    server = Etcd(url, process, workdir)
    try:
        until(healthy, "etcd to answer")
        yield server
    finally:
        server.stop_holders()
        process.kill()
        process.wait(timeout=WAIT_S)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def etcd(etcd_server: Etcd) -> Iterator[Etcd]:
    try:
        yield etcd_server
    finally:
        etcd_server.stop_holders()
        etcd_server.ctl("del", "--prefix", "/", check=False)
