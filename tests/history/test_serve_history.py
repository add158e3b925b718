"""`lockwatch serve` while it records (issue 44, item 5), as a real process over
a real flock wait: the wait counters and gauge on /metrics, and the recorded
episode on /v1/history (with the same token as /v1/locks)."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.history.harness import wait_until

TOKEN = "history-test-token-0123456789"


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    locks = tmp_path / "locks"
    locks.mkdir()
    token = tmp_path / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lockwatch",
            "serve",
            "--kernel",
            str(locks),
            "--listen",
            "127.0.0.1:0",
            "--refresh",
            "0.2",
            "--token-file",
            str(token),
            "--history",
            str(tmp_path / "history.sqlite3"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert serve.stderr is not None
        line = serve.stderr.readline().decode()
        found = re.search(r"listening on (http://\S+)", line)
        assert found, line
        yield found[1], locks
    finally:
        serve.terminate()
        serve.wait(60)


def get(url: str, token: str | None = TOKEN) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def metric(body: bytes, name: str) -> float:
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith(name + "{") and 'server="kernel"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_serve_counts_waits_and_answers_history(serving: tuple[str, Path]) -> None:
    url, locks = serving
    lock = locks / "deploy.lock"
    lock.touch()
    holder = subprocess.Popen(["flock", str(lock), "cat"], stdin=subprocess.PIPE)
    waiter = None
    try:
        wait_until(lambda: b"deploy" in get(f"{url}/v1/locks")[1], "the held lock served")
        waiter = subprocess.Popen(["flock", "-w", "60", str(lock), "true"])
        wait_until(
            lambda: metric(get(f"{url}/metrics")[1], "lockwatch_longest_wait_seconds") > 0,
            "a wait going on in the gauge",
        )
        assert holder.stdin is not None
        holder.stdin.close()
        assert waiter.wait(60) == 0
        wait_until(
            lambda: (
                metric(get(f"{url}/metrics")[1], "lockwatch_longest_wait_seconds") == 0
                and metric(get(f"{url}/metrics")[1], "lockwatch_wait_episodes_total") == 1
            ),
            "the wait over, one episode counted",
        )
    finally:
        holder.kill()
        holder.wait()
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
    body = get(f"{url}/metrics")[1]
    assert metric(body, "lockwatch_lock_wait_seconds_total") > 0
    assert b"lockwatch_history_recording 1.0" in body
    assert get(f"{url}/v1/history?since=-1h", token=None)[0] == 401
    assert get(f"{url}/v1/history?since=yesterday")[0] == 400

    def episodes() -> list[dict[str, object]]:
        status, answer = get(f"{url}/v1/history?since=-1h&until=")
        assert status == 200, answer
        found: list[dict[str, object]] = orjson.loads(answer)["episodes"]
        return [e for e in found if e["waiters"]]

    wait_until(lambda: len(episodes()) == 1, "the episode on /v1/history")
    episode = episodes()[0]
    assert episode["source"] == "kernel" and episode["ended_by"] == "released"
    assert episode["waiters"][0]["outcome"] == "acquired"  # type: ignore[index]
