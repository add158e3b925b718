"""A real ZooKeeper for the ZooKeeper source's tests: Debian's `zookeeper`
package (its jars under /usr/share/java, Java 17) started as a throwaway
standalone server (`ZooKeeperServerMain`) with a private zoo.cfg and data
directory on a free loopback port, one per xdist worker, killed at teardown.
Clients are kazoo's real recipes. Every test works under a znode of its own,
deleted at teardown.

Without ZooKeeper or Java the tests skip with the reason, and fail with it when
LOCKWATCH_REQUIRE_TOOLS is set (CI): a test of a real server never passes by not
running it.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.installs import install_failed

WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
JARS = Path("/usr/share/java")
# ZooKeeperServerMain's classpath, as Debian's zkEnv.sh builds it, minus what a
# standalone server with no admin server and no metrics never loads.
CLASSPATH = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
    "netty-handler.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-transport.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "metrics-core.jar",
    "commons-cli.jar",
    "snappy-java.jar",
)
HOLDER = Path(__file__).with_name("holder.py")


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


def four(port: int, word: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(word)
        answer = b""
        while piece := sock.recv(65536):
            answer += piece
    return answer.decode()


@dataclass
class ZooKeeper:
    process: subprocess.Popen[bytes]
    port: int
    workdir: str
    holders: list[subprocess.Popen[str]] = field(default_factory=list)
    clients: list[Any] = field(default_factory=list)

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self, timeout: float = 10.0) -> Any:
        """A kazoo client of the test's own (stopped at teardown)."""
        from kazoo.client import KazooClient

        client = KazooClient(self.connect, timeout=timeout)
        client.start(timeout=WAIT_S)
        self.clients.append(client)
        return client

    def holder(self, *args: str) -> subprocess.Popen[str]:
        """holder.py in a process of its own (a holder to kill): it prints
        `ready` once it holds or queues as told."""
        process = subprocess.Popen(
            [sys.executable, str(HOLDER), self.connect, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.holders.append(process)
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line == "ready", line
        return process

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def cleanup(self) -> None:
        for holder in self.holders:
            if holder.poll() is None:
                holder.kill()
            holder.wait(timeout=WAIT_S)
        self.holders.clear()
        for client in self.clients:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()
        self.clients.clear()

    def stop(self) -> None:
        self.cleanup()
        self.resume()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=WAIT_S)
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_zookeeper(whitelist: str | None = "*") -> ZooKeeper:
    """A standalone ZooKeeper of our own on a free loopback port; `whitelist`:
    its `4lw.commands.whitelist` (None: ZooKeeper's default, `srvr` alone)."""
    java = shutil.which("java")
    missing = [jar for jar in CLASSPATH if not (JARS / jar).exists()]
    if java is None or missing:
        install_failed(
            f"ZooKeeper is not installed (apt-get install zookeeper): no {missing or 'java'}"
        )
    workdir = tempfile.mkdtemp(prefix="lw-zk-")
    port = free_port()
    config = [
        "tickTime=500",
        f"dataDir={workdir}/data",
        f"clientPort={port}",
        "clientPortAddress=127.0.0.1",
        "admin.enableServer=false",
        # Sessions of up to a minute: a killed holder's node outlives the test's reads.
        "maxSessionTimeout=60000",
    ]
    if whitelist is not None:
        config.append(f"4lw.commands.whitelist={whitelist}")
    Path(workdir, "zoo.cfg").write_text("\n".join(config) + "\n")
    classpath = ":".join(str(JARS / jar) for jar in CLASSPATH)
    process = subprocess.Popen(
        [
            java,
            "-Xmx128m",
            "-cp",
            classpath,
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            f"{workdir}/zoo.cfg",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = ZooKeeper(process, port, workdir)

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"ZooKeeper exited with {process.returncode}")
        try:
            return four(port, b"srvr").startswith("Zookeeper version")
        except OSError:
            return False

    try:
        until(up, "ZooKeeper to answer srvr", timeout=60)
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeper]:
    server = start_zookeeper("*")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def zk_plain_server() -> Iterator[ZooKeeper]:
    """A ZooKeeper with the default four-letter-word whitelist (no cons)."""
    server = start_zookeeper(None)
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Area:
    """One test's corner of a server: a znode of its own."""

    zk: ZooKeeper
    root: str

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"


def _area(server: ZooKeeper) -> Iterator[Area]:
    root = f"/lwt-{uuid.uuid4().hex[:10]}"
    admin = server.client()
    admin.ensure_path(root)
    try:
        yield Area(server, root)
    finally:
        server.cleanup()
        cleaner = server.client()
        with contextlib.suppress(Exception):
            cleaner.delete(root, recursive=True)
        server.cleanup()


@pytest.fixture
def zk(zk_server: ZooKeeper) -> Iterator[Area]:
    yield from _area(zk_server)


@pytest.fixture
def zk_plain(zk_plain_server: ZooKeeper) -> Iterator[Area]:
    yield from _area(zk_plain_server)


@pytest.fixture
def zk_throwaway() -> Iterator[ZooKeeper]:
    """A server of this test's alone (one it stops or pauses)."""
    server = start_zookeeper("*")
    try:
        yield server
    finally:
        server.stop()
