"""The dashboard's empty state (issue 33, item 6): what it looked for and where,
and what the sources could show that is not shown, with the flag that shows
it: kernel locks on files under the roots with --kernel off, a server on this
host lockwatch is not watching (seen by its port, never connected to).

The hints come from the real sources (cli/where.py's `Targets.hints`, each
plugin's `hint`) reading the real /proc; the kernel lock is taken by the real
util-linux flock(1). The feed is the empty scenario's (tests/ui/fakes.py), so
the board stays empty whatever the file scan would find.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from lockwatch.cli.where import select_targets
from lockwatch.config import Config
from lockwatch.sources.listening import listening_ports
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.panels import EmptyState
from tests.kernel.flock_tree import FlockTree, start
from tests.ui.fakes import empty_scenario, error_scenario, make_app, settle, until


@pytest.fixture
def trees() -> Iterator[list[FlockTree]]:
    started: list[FlockTree] = []
    try:
        yield started
    finally:
        for tree in started:
            tree.close()


def empty_text(app: LockwatchApp) -> str:
    console = Console(width=1000, record=True, file=io.StringIO())
    console.print(app.query_one("#empty", EmptyState).content)
    return " ".join(console.export_text().split())


async def shown_with(values: dict[str, object], wait_for: str) -> str:
    targets = select_targets(values, Config(), {})
    app = make_app(empty_scenario(), hints=targets.hints)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: wait_for in empty_text(app), f"{wait_for!r} said")
        return empty_text(app)


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="kernel locks: /proc/locks")
async def test_kernel_locks_under_the_roots_not_shown_say_how_to_show_them(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    start(trees, tmp_path / "app.db")  # any name: a database, not a *.lock
    said = await shown_with({"paths": (str(tmp_path),)}, "--kernel")
    assert "Looked for *.lock, *.pid, lock directories and files tools name their own way," in said
    assert f"and files the kernel holds a lock on, under {tmp_path}." in said
    assert f"kernel locks on 1 file under {tmp_path} not shown: --kernel shows them" in said

    # With --kernel on there is nothing more to show: no hint.
    said = await shown_with({"paths": (str(tmp_path),), "kernel": True}, "Looked for")
    assert "--kernel" not in said


async def test_no_kernel_lock_under_the_roots_no_kernel_hint(tmp_path: Path) -> None:
    said = await shown_with({"paths": (str(tmp_path),)}, "Looked for")
    assert "--kernel" not in said


def test_a_listening_port_is_seen_without_connecting() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        assert listening_ports([port]) == set()  # bound, not listening yet
        server.listen()
        assert listening_ports([port]) == {port}
    assert listening_ports([port]) == set()


async def test_when_nothing_could_be_read_the_failure_comes_first() -> None:
    """Every source in error: "No locks right now." would read as "no locks"; the
    news is that nothing could be looked at, and each one's reason."""
    app = make_app(error_scenario(last_locks=False))
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        said = empty_text(app)
        assert said.startswith("Could not look for locks:"), said
        assert "No locks right now" not in said
        assert "does not exist" in said and "Connection refused" in said


@pytest.mark.parametrize(
    ("source", "port", "flag"),
    [
        ("postgres", 5432, "--pg postgresql://"),
        ("mysql", 3306, "--mysql mysql://"),
        ("redis", 6379, "--redis redis://127.0.0.1:6379"),
    ],
)
def test_a_local_server_not_watched_names_the_flag(
    monkeypatch: pytest.MonkeyPatch, source: str, port: int, flag: str
) -> None:
    """The port table is imitated here (what /proc/net/tcp would say): which server
    listens is the machine's business; what the hint says of it is the plugin's."""
    from lockwatch.sources import listening, registry
    from lockwatch.sources.contract import Hinting, Wanted

    plugin: object = registry.by_name(source)
    assert isinstance(plugin, Hinting)
    wanted = Wanted((), {}, Config(), {})
    monkeypatch.setattr(listening, "listening_ports", lambda ports: {port} & set(ports))
    hint = plugin.hint(wanted, running=False)
    assert hint is not None and flag in hint.could_show and f"port {port}" in hint.could_show
    assert plugin.hint(wanted, running=True) is None  # watched already: nothing to add
    monkeypatch.setattr(listening, "listening_ports", lambda ports: set())
    monkeypatch.setattr(listening, "existing_sockets", lambda paths: [])
    assert plugin.hint(wanted, running=False) is None  # nothing here to watch


@pytest.fixture
def redis_on_its_port() -> Iterator[None]:
    """A real Redis listening on its own port, 6379: the machine's, else one of
    this test's own (nothing saved)."""
    if listening_ports([6379]):
        yield
        return
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    with tempfile.TemporaryDirectory(prefix="lw-redis-") as workdir:
        args = ("--port", "6379", "--bind", "127.0.0.1", "--save", "", "--dir", workdir)
        process = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not listening_ports([6379]):
                assert process.poll() is None and time.monotonic() < deadline, "no redis"
                time.sleep(0.02)
            yield
        finally:
            process.kill()
            process.wait()


async def test_the_local_redis_is_named_beside_postgresql_and_mysql(
    tmp_path: Path, redis_on_its_port: None
) -> None:
    """Issue 46 item 10: the empty state named the local PostgreSQL and MySQL but
    not the Redis listening on 6379 (the real port table, the real Redis)."""
    said = await shown_with({"paths": (str(tmp_path),)}, "a Redis server")
    assert (
        "a Redis server listens on port 6379 on this host, not watched:"
        " --redis redis://127.0.0.1:6379 shows its lock keys"
    ) in said, said
    # Watched already: nothing to add.
    said = await shown_with(
        {"paths": (str(tmp_path),), "redis_urls": ("redis://127.0.0.1:6379/0",)}, "Looked for"
    )
    assert "a Redis server listens" not in said
