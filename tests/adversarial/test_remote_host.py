"""A remote never speaks for this host. A serve that says it is this host (its
document's `host`, or a record's own `host`, names this machine) is shown under
the address it was read from, with what it claimed beside it: its rows are not
this host's rows, and a refusal never tells the operator to run a command "on"
this host for what is only a remote's claim.

The remote is the loopback server of test_remote_deadline.py (a hostile serve)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from lockwatch.actions.targets import prepare
from lockwatch.clock import FrozenClock
from lockwatch.model.action import Kind
from lockwatch.model.kinds import kinds
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import evaluate
from lockwatch.sources.remote.document import read_document
from lockwatch.sources.remote.plugin import find_remote
from tests.adversarial.test_remote_deadline import (
    BOUND_S,
    HOST,
    Answer,
    Remote_,
    http_answer,
    lock_record,
    ls_document,
)
from tests.conftest import LOCAL_HOST, NOW
from tests.facts_of import remote_of

URL = "http://db7:9464"


@pytest.mark.parametrize(
    ("document_host", "record_host"),
    [
        (LOCAL_HOST, None),
        (LOCAL_HOST.upper() + ".example.net", None),
        ("db7", LOCAL_HOST),
        ("db7", "localhost"),
    ],
)
def test_a_claim_to_be_this_host_is_not_taken(document_host: str, record_host: str | None) -> None:
    extra = {} if record_host is None else {"host": record_host}
    listing = read_document(
        ls_document(lock_record(**extra), host=document_host), URL, local_host=LOCAL_HOST
    )
    (lock,) = listing.locks
    origin = remote_of(lock)
    assert origin.host == "db7:9464"  # where it was read from
    assert origin.claimed_host == (record_host or document_host)
    verdict = evaluate(lock, StaticProcesses(), FrozenClock(NOW), LOCAL_HOST)
    assert "claims_this_host" in verdict.codes
    (record,) = listing.records
    assert record["host"] == "db7:9464" and record["claimed_host"] == origin.claimed_host
    for kind in kinds():
        plan = prepare(kind, lock, verdict, roots=("/srv",))
        assert plan.refusal is not None
        code, message = plan.refusal
        assert code == "remote"
        assert "lockwatch break" not in message and " run:" not in message
        assert f"On {LOCAL_HOST}" not in message and "does not speak for this host" in message


def test_another_host_named_by_a_serve_is_still_its_own() -> None:
    listing = read_document(ls_document(lock_record(host="db9")), URL, local_host=LOCAL_HOST)
    origin = remote_of(listing.locks[0])
    assert (origin.host, origin.claimed_host) == ("db9", None)


@pytest.fixture
def impostor() -> Iterator[Remote_]:
    body = ls_document(lock_record("file:/srv/locks/deploy.pid"), host=HOST)
    yield from Remote_(Answer(http_answer(body))).serve()


def test_ls_shows_an_impostor_under_its_address(impostor: Remote_) -> None:
    address = impostor.url.removeprefix("http://")
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--remote", impostor.url, "--json"],
        capture_output=True,
        text=True,
        timeout=BOUND_S + 30,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    (lock,) = json.loads(done.stdout)["locks"]
    assert (lock["host"], lock["claimed_host"], lock["remote"]) == (address, HOST, impostor.url)
    table = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--remote", impostor.url],
        capture_output=True,
        text=True,
        timeout=BOUND_S + 30,
        stdin=subprocess.DEVNULL,
    )
    assert f"{address}:/srv/locks/deploy.pid" in table.stdout
    assert f"{HOST}:/srv/locks/deploy.pid" not in table.stdout


@pytest.mark.parametrize(
    "claimed",
    [
        *("127.0.0.1:9464", "[::1]", "[::1]:9464", "::ffff:127.0.0.1", "127.0.1.1", "0.0.0.0"),
        *("localhost.localdomain", "ip6-localhost", "LocalHost."),
    ],
)
def test_a_loopback_claim_in_any_spelling_is_this_hosts_name(claimed: str) -> None:
    """Issue 47 item 19: a serve saying it is `127.0.0.1:9464` (or `[::1]`, …) was told
    to be run on: "On 127.0.0.1:9464 run: lockwatch break …"."""
    listing = read_document(
        ls_document(lock_record(), host=claimed), "http://127.0.0.1:9464", local_host=LOCAL_HOST
    )
    (lock,) = listing.locks
    assert remote_of(lock).claimed_host == claimed
    verdict = evaluate(lock, StaticProcesses(), FrozenClock(NOW), LOCAL_HOST)
    plan = prepare(Kind.BREAK, lock, verdict, roots=("/srv",))
    assert plan.refusal is not None
    message = plan.refusal[1]
    assert " run:" not in message and f"On {claimed}" not in message
    assert "does not speak for this host" in message


@pytest.mark.parametrize("url", ["http://127.0.0.1:9464", "http://[::1]:9464", "http://localhost"])
def test_a_loopback_serves_id_names_no_host_to_run_on(url: str) -> None:
    """`lockwatch break 'remote:http://127.0.0.1:9464#…'` said "On 127.0.0.1 run: …": a
    loopback serve is this host's or a tunnel's far end, and nobody here knows which."""
    lock, verdict, _ = find_remote(f"remote:{url}#file:/srv/locks/deploy.pid")
    plan = prepare(Kind.BREAK, lock, verdict, roots=("/srv",))
    assert plan.refusal is not None
    code, message = plan.refusal
    assert code == "remote"
    host = remote_of(lock).host
    assert f"On {host}" not in message and f"on host {host}" not in message
    assert "loopback" in message and "cannot tell" in message
    assert "not here" not in verdict.reasons[0].message
