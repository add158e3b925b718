"""Secrets never in argv: a password in --pg, --redis, --redlock, --mysql,
--etcd or --remote leaves the process's arguments (/proc/<pid>/cmdline, what
`ps` shows) as soon as the option is parsed, and the ones whose sources take a
password are warned about once, with the ways that never show it.

The processes are real: `lockwatch serve` and the dashboard (in a pty) polling a
throwaway redis-server that requires the password (so the password hidden from
`ps` is still the one used), and MariaDB with a password that fails (only the
arguments matter there). Each wait is on an event (a line of output) with a
bound that only keeps a broken run from hanging the suite.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stores.conftest import Throwaway, start_redis

BOUND_S = 30.0
REDIS_SECRET = "S3cret-redis"
MYSQL_SECRET = "MyS3cret-mysql"
PG_SECRET = "PgS3cret-pg"


@pytest.fixture
def redis_with_password() -> Iterator[Throwaway]:
    server = start_redis("--requirepass", REDIS_SECRET)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PG", "LOCKWATCH_", "MYSQL", "REDISCLI"))
    }
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), TERM="xterm-256color")
    return env


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def read_until(fd: int, pattern: re.Pattern[str], seen: list[str]) -> re.Match[str]:
    """Output of `fd` until `pattern` is in it (all of it so far in `seen[0]`)."""
    deadline = time.monotonic() + BOUND_S
    while True:
        match = pattern.search(seen[0])
        if match:
            return match
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        if not ready:
            raise AssertionError(f"no {pattern.pattern!r} within {BOUND_S} s: {seen[0]!r}")
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # a pty whose child is gone
            chunk = b""
        if not chunk:
            raise AssertionError(f"output ended before {pattern.pattern!r}: {seen[0]!r}")
        seen[0] += chunk.decode("utf-8", "replace")


def server_flags(redis: Throwaway) -> list[str]:
    return [
        *("--redis", f"redis://:{REDIS_SECRET}@127.0.0.1:{redis.port}/0"),
        *("--mysql", f"mysql://lw_nobody:{MYSQL_SECRET}@127.0.0.1:3306/test"),
        *("--pg", f"postgresql://lw_nobody:{PG_SECRET}@127.0.0.1:5432/postgres"),
        *("--refresh", "0.2"),
    ]


def assert_hidden(pid: int, redis: Throwaway) -> None:
    shown = cmdline(pid)
    joined = " ".join(shown)
    for secret in (REDIS_SECRET, MYSQL_SECRET, PG_SECRET):
        assert secret not in joined, joined
    # Only the password went: where the servers are is still there to see.
    assert f"redis://:{'*' * len(REDIS_SECRET)}@127.0.0.1:{redis.port}/0" in shown
    assert f"mysql://lw_nobody:{'*' * len(MYSQL_SECRET)}@127.0.0.1:3306/test" in shown


def assert_warned(stderr: str) -> None:
    for flag, advice in (
        ("--redis", "REDISCLI_AUTH"),
        ("--mysql", "~/.my.cnf"),
        ("--pg", "PGPASSFILE"),
    ):
        lines = [line for line in stderr.splitlines() if f"a password in {flag} " in line]
        assert len(lines) == 1, stderr  # said once
        assert advice in lines[0] and "readable by every local user (ps)" in lines[0]
    assert "MYSQL_PWD (which MySQL calls insecure" in stderr
    for secret in (REDIS_SECRET, MYSQL_SECRET, PG_SECRET):
        assert secret not in stderr


def test_serve_hides_every_password(tmp_path: Path, redis_with_password: Throwaway) -> None:
    env = clean_env(tmp_path)
    child = subprocess.Popen(
        [
            *(sys.executable, "-m", "lockwatch", "serve", str(tmp_path)),
            *("--listen", "127.0.0.1:0", *server_flags(redis_with_password)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=env["HOME"],
    )
    assert child.stderr is not None
    seen = [""]
    try:
        port = int(read_until(child.stderr.fileno(), re.compile(r"127\.0\.0\.1:(\d+)"), seen)[1])
        assert_hidden(child.pid, redis_with_password)
        assert_warned(seen[0])

        # The password left `ps`, not lockwatch: the server that requires it answers.
        def redis_up() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                metrics = answer.read().decode()
            return any(
                line.startswith("lockwatch_source_up{")
                and 'source="redis"' in line
                and line.endswith(" 1.0")
                for line in metrics.splitlines()
            )

        deadline = time.monotonic() + BOUND_S
        while not redis_up():
            assert time.monotonic() < deadline, "redis never up in /metrics"
            time.sleep(0.1)
        assert_hidden(child.pid, redis_with_password)  # and stays hidden
    finally:
        child.kill()
        child.wait(timeout=BOUND_S)


def test_the_dashboard_hides_every_password(tmp_path: Path, redis_with_password: Throwaway) -> None:
    env = clean_env(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the dashboard on the pty
        os.chdir(env["HOME"])
        os.execve(
            sys.executable,
            [sys.executable, "-m", "lockwatch", str(tmp_path), *server_flags(redis_with_password)],
            env,
        )
    seen = [""]
    try:
        # The warnings come before the screen is taken (the alternate screen).
        for flag in ("--redis", "--mysql", "--pg"):
            read_until(fd, re.compile(f"a password in {flag} .*\n"), seen)
        assert_hidden(pid, redis_with_password)
        assert_warned(seen[0].replace("\r", ""))
        read_until(fd, re.compile(re.escape("\x1b[?1049h")), seen)
        assert_hidden(pid, redis_with_password)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


# A process that parses the run's options as `ls`, the dashboard and serve do
# (every source's options, and resolve_targets), then waits to be looked at.
CHILD = """
import sys
import click
from lockwatch.cli.where import resolve_targets, target_options

@click.command()
@target_options
def main(**values):
    try:
        resolve_targets(values, None)
    except click.UsageError as exc:
        print("refused:", exc, file=sys.stderr, flush=True)
    print("parsed", flush=True)
    sys.stdin.readline()

main()
"""


@pytest.mark.parametrize(
    ("flag", "value", "secret", "warned"),
    [
        ("--redis", "redis://:{s}@127.0.0.1:1/0", "Redis-pw", True),
        ("--redis", "redis://127.0.0.1:1/0?password={s}", "Query-pw", True),
        (
            "--redlock",
            "redis://:{s}@127.0.0.1:1/0,redis://:Other-pw@127.0.0.1:2/0",
            "Lock-pw",
            True,
        ),
        ("--mysql", "mysql://u:{s}@127.0.0.1:1/db", "My%40pw", True),
        ("--pg", "host=127.0.0.1 port=1 password={s}", "Kv-pw", True),
        ("--etcd", "http://u:{s}@127.0.0.1:1", "Etcd-pw", True),
        # --remote refuses credentials in its URLs (and says so): they still leave `ps`.
        ("--remote", "http://u:{s}@127.0.0.1:1", "Remote-tok", False),
        ("--remote", "http://127.0.0.1:1/?token={s}", "Query-tok", False),
    ],
)
@pytest.mark.parametrize("joined", [False, True])
def test_each_option_s_password_leaves_the_arguments(
    tmp_path: Path, flag: str, value: str, secret: str, warned: bool, joined: bool
) -> None:
    given = value.format(s=secret)
    args = [f"{flag}={given}"] if joined else [flag, given]
    env = clean_env(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=env["HOME"],
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        read_until(child.stdout.fileno(), re.compile("parsed"), [""])
        shown = "\0".join(cmdline(child.pid))
        assert secret not in shown and "Other-pw" not in shown, shown
        assert "127.0.0.1" in shown  # the rest of the argument stays
        assert str(tmp_path) in shown  # and so do the others
    finally:
        _, err = child.communicate(b"\n", timeout=BOUND_S)
    stderr = err.decode()
    if warned:  # (--remote's refusal is its own source's to word)
        assert secret not in stderr
    assert (f"a password in {flag} " in stderr) is warned, stderr


def test_a_short_password_stars_its_own_argument_only(tmp_path: Path) -> None:
    """`a` is in the path too: only the URL's copy of it leaves `ps`."""
    data = tmp_path / "data"
    data.mkdir()
    env = clean_env(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data), "--redis", "redis://:a@127.0.0.1:1/0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=env["HOME"],
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        read_until(child.stdout.fileno(), re.compile("parsed"), [""])
        shown = cmdline(child.pid)
        assert str(data) in shown and "redis://:*@127.0.0.1:1/0" in shown, shown
    finally:
        child.communicate(b"\n", timeout=BOUND_S)


def test_a_password_from_the_environment_is_not_warned_about(tmp_path: Path) -> None:
    env = {**clean_env(tmp_path), "REDISCLI_AUTH": "env-pw"}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), "--redis", "redis://127.0.0.1:1/0"],
        input=b"\n",
        capture_output=True,
        env=env,
        cwd=env["HOME"],
        timeout=BOUND_S,
        check=False,
    )
    assert b"parsed" in child.stdout and b"warning" not in child.stderr, child.stderr
