"""A real Prometheus (Debian's package) scrapes `lockwatch serve` with the token
docs/fleet.md's scrape config gives it, evaluates the shipped rules, and answers
queries about lockwatch_lock_stale. One Prometheus and one serve for the module."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.conftest import Served, binary, free_port, serving, stale_tree, wait_for
from tests.serve.test_rules import RULES

TOKEN = "prometheus-scrapes-with-this"


@dataclass
class Stack:
    served: Served
    prometheus: str  # its base URL
    tree: Path

    def query(self, promql: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.prometheus}/api/v1/query", params={"query": promql}, timeout=5)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = binary("prometheus")
    root = tmp_path_factory.mktemp("prometheus")
    tree = root / "locks"
    stale_tree(tree, ("nightly-reindex",))
    token_file = root / "lockwatch.token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    with serving([str(tree), "--token-file", str(token_file)], root) as served:
        target = served.wait_healthy().removeprefix("http://")
        port = free_port()
        config = root / "prometheus.yml"
        config.write_text(
            f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: ["{RULES}"]
scrape_configs:
  - job_name: lockwatch
    authorization: {{credentials_file: "{token_file}"}}
    static_configs: [{{targets: ["{target}"]}}]
  - job_name: lockwatch-without-token
    static_configs: [{{targets: ["{target}"]}}]
"""
        )
        process = subprocess.Popen(
            [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(root / "prometheus.log").open("w"),
        )
        base = f"http://127.0.0.1:{port}"
        try:

            def ready() -> bool:
                if process.poll() is not None:
                    pytest.fail(f"prometheus exited: {(root / 'prometheus.log').read_text()}")
                with contextlib.suppress(httpx.HTTPError):
                    return httpx.get(f"{base}/-/ready", timeout=1).status_code == 200
                return False

            wait_for(ready, "prometheus to be ready")
            yield Stack(served, base, tree)
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def test_prometheus_scrapes_the_stale_lock_back(stack: Stack) -> None:
    wait_for(lambda: stack.query('lockwatch_lock_stale{job="lockwatch"}'), "a scrape with data")
    (series,) = stack.query('lockwatch_lock_stale{job="lockwatch"}')
    labels = series["metric"]
    assert labels["name"] == "nightly-reindex"
    assert (labels["source"], labels["format"]) == ("file", "generic")
    assert labels["instance"] == stack.served.url.removeprefix("http://")  # type: ignore[union-attr]
    assert series["value"][1] == "1"
    (stale,) = stack.query('lockwatch_locks{job="lockwatch",state="stale"}')
    assert stale["value"][1] == "1"


def test_the_token_is_what_lets_prometheus_in(stack: Stack) -> None:
    def both_scraped() -> bool:
        return len(stack.query("up")) == 2

    wait_for(both_scraped, "both jobs scraped once")
    up = {series["metric"]["job"]: series["value"][1] for series in stack.query("up")}
    assert up == {"lockwatch": "1", "lockwatch-without-token": "0"}


def test_the_shipped_rules_run_on_what_serve_exports(stack: Stack) -> None:
    def pending() -> list[dict[str, Any]]:
        return stack.query('ALERTS{alertname="LockwatchLockStale"}')

    wait_for(pending, "the stale-lock alert to be pending")
    (alert,) = pending()
    # Stale for seconds, not yet 5 minutes: pending, naming the lock.
    assert alert["metric"]["alertstate"] == "pending"
    assert alert["metric"]["name"] == "nightly-reindex"
    assert not stack.query('ALERTS{alertname="LockwatchSourceDown"}')
