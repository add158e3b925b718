"""etcd locks written by real client libraries other than etcdctl (issue 35,
items 3 and 4), each judged against the library's own answer:

- the etcd3 npm client's Election (installed with `npm install` into a
  temporary directory, run by node): candidates' keys are
  `election/<name>/<lease id in decimal>`; the leader is the one its
  `election.leader()` names, the other candidate waits behind it;
- tooz's etcd3gw driver (Python, from PyPI): its locks are keys
  `/tooz/locks<name>`, not under a directory, so `--etcd-prefix /tooz/locks`
  must read them as a key prefix.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.npm import npm_packages
from tests.stores.conftest import WAIT_S, Etcd, until

CANDIDATE = r"""
const { Etcd3 } = require('etcd3');
const client = new Etcd3({ hosts: process.argv[2] });
const campaign = client.election(process.argv[3], 30).campaign(process.argv[4]);
campaign.on('elected', () => process.stdout.write('elected\n'));
campaign.on('error', (err) => { console.error(String(err)); process.exit(1); });
"""
LEADER = r"""
const { Etcd3 } = require('etcd3');
const client = new Etcd3({ hosts: process.argv[2] });
client.election(process.argv[3]).leader().then((value) => {
  process.stdout.write(JSON.stringify(value === undefined ? null : value) + '\n');
  client.close();
});
"""


def listing(etcd: Etcd, *args: str) -> dict[str, Any]:
    code, out, err = run_cli("ls", "--etcd", etcd.url, "--json", *args)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


@pytest.fixture(scope="module")
def etcd3_js(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = npm_packages(tmp_path_factory, "etcd3@1")
    (directory / "candidate.js").write_text(CANDIDATE)
    (directory / "leader.js").write_text(LEADER)
    return directory


@pytest.fixture
def nodes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=WAIT_S)


def test_etcd3_npm_election_leader_leads_and_the_other_candidate_waits(
    etcd: Etcd, etcd3_js: Path, nodes: list[subprocess.Popen[str]]
) -> None:
    host = etcd.url.removeprefix("http://")

    def candidate(value: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            ["node", str(etcd3_js / "candidate.js"), host, "deploy", value],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        nodes.append(process)
        return process

    first = candidate("node-a")
    assert first.stdout is not None and first.stdout.readline() == "elected\n"
    candidate("node-b")
    until(lambda: len(etcd.keys("election/deploy/")) == 2, "the second candidate's key")

    leader_said = subprocess.run(
        ["node", str(etcd3_js / "leader.js"), host, "deploy"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=True,
    )
    leader = json.loads(leader_said.stdout)
    assert leader == "node-a"

    locks = listing(etcd, "--etcd-prefix", "election/")["locks"]
    assert len(locks) == 2
    for lock in locks:
        # The library's key: the lease in decimal, as this listing's lease_id is.
        assert lock["key"] == f"election/deploy/{lock['lease_id']}"
        assert lock["format"] == "etcd-mutex" and lock["name"] == "election/deploy"
    (held,) = [lock for lock in locks if lock["state"] == "active"]
    (waiter,) = [lock for lock in locks if lock["state"] != "active"]
    assert held["value"] == leader
    assert held["blocking"] == [waiter["lease"]] and held["queue_position"] == 0
    assert waiter["state"] == "waiting" and waiter["value"] == "node-b"
    assert waiter["blocked_by"] == [held["lease"]] and waiter["queue_position"] == 1


def test_tooz_locks_under_a_prefix_that_is_not_a_directory(etcd: Etcd) -> None:
    tooz = pytest.importorskip("tooz.coordination")
    host, port = etcd.url.removeprefix("http://").split(":")
    coordinator = tooz.get_coordinator(f"etcd3+http://{host}:{port}", b"lockwatch-test")
    coordinator.start(start_heart=True)
    lock = coordinator.get_lock(b"nightly-backup")
    try:
        assert lock.acquire(blocking=False)
        tooz_keys = etcd.keys("/tooz/locks")
        assert tooz_keys and all(not k.startswith("/tooz/locks/") for k in tooz_keys)
        locks = listing(etcd, "--etcd-prefix", "/tooz/locks")["locks"]
        assert [lock["key"] for lock in locks] == tooz_keys
        (listed,) = locks
        assert listed["state"] == "active" and listed["lease_id"]
        # tooz's own answer: another member cannot take it.
        other = tooz.get_coordinator(f"etcd3+http://{host}:{port}", b"lockwatch-other")
        other.start()
        try:
            assert not other.get_lock(b"nightly-backup").acquire(blocking=False)
        finally:
            other.stop()
    finally:
        lock.release()
        coordinator.stop()
    assert listing(etcd, "--etcd-prefix", "/tooz/locks")["locks"] == []
