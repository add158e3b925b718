"""etcd as a lock source, against a throwaway etcd and `etcdctl lock` holders and
waiters: the listing matches etcd's own answers, waiters queue under their
holder, and a break is compare-and-swap against the revision the operator saw."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from lockwatch.sources.etcd import ids
from tests.conftest import run_cli
from tests.stores.conftest import WAIT_S, Etcd, until


def listing(etcd: Etcd, *args: str) -> dict[str, Any]:
    code, out, err = run_cli("ls", "--etcd", etcd.url, "--json", *args)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def holder_and_waiter(etcd: Etcd, name: str, ttl: int = 10) -> tuple[subprocess.Popen[str], str]:
    holder = etcd.lock(name, ttl=ttl)
    assert holder.stdout is not None
    key = holder.stdout.readline().strip()  # etcdctl prints its key once it holds the lock
    assert key.startswith(f"{name}/"), key
    etcd.lock(name)
    until(lambda: len(etcd.keys(f"{name}/")) == 2, "the waiter's key")
    return holder, key


def etcd_json(etcd: Etcd, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.post(f"{etcd.url}/v3{path}", json=body, timeout=WAIT_S).json()
    return answer


def test_etcdctl_lock_holder_and_waiter_as_etcd_has_them(etcd: Etcd) -> None:
    holder, key = holder_and_waiter(etcd, "/locks/deploy")
    document = listing(etcd)
    locks = {lock["key"]: lock for lock in document["locks"]}
    assert len(locks) == 2
    held = locks[key]
    waiter = next(lock for lock in locks.values() if lock["key"] != key)

    # What etcd itself says about the holder's key and lease.
    kv = json.loads(etcd.ctl("get", key, "-w", "json"))["kvs"][0]
    lease = json.loads(etcd.ctl("lease", "timetolive", format(kv["lease"], "x"), "-w", "json"))
    server = etcd.url.removeprefix("http://")
    assert held["id"] == ids.etcd_id(server, key)
    assert (held["source"], held["format"], held["name"]) == ("etcd", "etcd-mutex", "/locks/deploy")
    assert held["state"] == "active"
    assert held["lease"] == format(kv["lease"], "x") == key.rsplit("/", 1)[1]
    assert held["lease_id"] == kv["lease"]
    assert held["holder"]["session"] == held["lease"]
    assert held["create_revision"] == kv["create_revision"]
    assert held["mod_revision"] == kv["mod_revision"]
    assert held["value"] == ""
    assert held["ttl_seconds"] == lease["granted-ttl"] == 10
    assert 0 < held["ttl_left_seconds"] <= 10
    assert abs(held["ttl_left_seconds"] - lease["ttl"]) <= 2
    assert held["expires_at"] is not None and held["queue_position"] == 0
    assert [r["code"] for r in held["reasons"]] == ["blocking"]
    assert held["blocking"] == [waiter["lease"]]

    assert waiter["state"] == "waiting"
    assert waiter["name"] == "/locks/deploy"
    assert waiter["blocked_by"] == [held["lease"]]
    assert waiter["queue_position"] == 1
    assert waiter["create_revision"] > held["create_revision"]
    assert [r["code"] for r in waiter["reasons"]] == ["waiting"]

    (tree,) = [t for t in document["blocking"] if t["server"] == f"etcd:{server}"]
    (root,) = tree["roots"]
    assert root["id"] == held["lease"]
    assert [w["id"] for w in root["waiters"]] == [waiter["lease"]]
    assert document["sources"] == [
        {
            "kind": "etcd",
            "name": server,
            "status": "connected",
            "reason": None,
            "updated_at": document["sources"][0]["updated_at"],
            "next_retry_at": None,
        }
    ]
    holder.kill()


def test_keys_with_and_without_a_lease_and_other_prefixes(etcd: Etcd) -> None:
    lease = json.loads(etcd.ctl("lease", "grant", "30", "-w", "json"))["ID"]
    etcd.ctl("put", "--lease", format(lease, "x"), "/locks/py-etcd3-job", "token-123")
    etcd.ctl("put", "/locks/forever", "someone")
    etcd.ctl("put", "/app/mutex/build", "ci-7")
    etcd.ctl("put", "/locksmith/not-a-lock", "x")  # /locks is a directory, not a string prefix
    document = listing(etcd, "--etcd-prefix", "/app/mutex")
    by_key = {lock["key"]: lock for lock in document["locks"]}
    assert set(by_key) == {"/locks/py-etcd3-job", "/locks/forever", "/app/mutex/build"}
    job = by_key["/locks/py-etcd3-job"]
    assert (job["format"], job["state"], job["holder"]["session"]) == (
        "etcd",
        "active",
        "token-123",
    )
    assert job["lease_id"] == lease and job["ttl_seconds"] == 30
    forever = by_key["/locks/forever"]
    assert forever["state"] == "active"
    assert [r["code"] for r in forever["reasons"]] == ["no_expiry"]
    assert forever["lease"] is None and forever["expires_at"] is None


def test_break_revokes_the_holders_lease_and_the_waiter_takes_over(
    etcd: Etcd, tmp_path: Path
) -> None:
    # A short session TTL: etcdctl's keep-alive (every TTL/3) learns of the revoke soon.
    holder, key = holder_and_waiter(etcd, "/locks/release", ttl=3)
    waiter = etcd.holders[-1]
    lock_id = ids.etcd_id(etcd.url.removeprefix("http://"), key)
    held = next(lock for lock in listing(etcd)["locks"] if lock["id"] == lock_id)
    audit = tmp_path / "audit.jsonl"
    code, out, err = run_cli(
        "break", lock_id, "--etcd", etcd.url, "--reason", "holder hung, INC-1", "--yes",
        "--force", "--audit-log", str(audit),
    )  # fmt: skip
    assert code == 0, err
    assert "revoked lease" in out
    # The holder's session ended: etcdctl notices and exits; the waiter now holds it.
    assert holder.wait(timeout=WAIT_S) == 1
    assert holder.stderr is not None and "session expired" in holder.stderr.read()
    assert waiter.stdout is not None
    taken = waiter.stdout.readline().strip()
    assert taken.startswith("/locks/release/") and taken != key
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["event"] for r in records] == ["action_intent", "lock_broken"]
    done = records[-1]
    assert done["target"]["key"] == key and done["target"]["source"] == "etcd"
    assert done["lease"] == held["lease"] and done["lease_revoked"] is True
    assert done["mod_revision"] == held["mod_revision"]
    assert done["previous_lock"]["key"] == key


def test_break_refused_when_the_revision_changed_since_it_was_seen(
    etcd: Etcd, tmp_path: Path
) -> None:
    """The operator saw one version of the key; someone wrote it again: nothing is
    deleted and no lease revoked."""
    from lockwatch.actions.audit import AuditLog, Operator
    from lockwatch.actions.plan import Kind
    from lockwatch.actions.run import Executor
    from lockwatch.actions.targets import find, prepare
    from lockwatch.clock import SystemClock
    from lockwatch.config import Config
    from lockwatch.sources.contract import Wanted

    lease = json.loads(etcd.ctl("lease", "grant", "60", "-w", "json"))["ID"]
    etcd.ctl("put", "--lease", format(lease, "x"), "/locks/cas", "first")
    server = etcd.url.removeprefix("http://")
    wanted = Wanted((), {"etcd_urls": (etcd.url,)}, Config(), {})
    found = find(ids.etcd_id(server, "/locks/cas"), wanted, "host")
    assert not isinstance(found, str)
    lock, verdict, peers = found
    plan = prepare(Kind.BREAK, lock, verdict, peers=peers)
    assert "mod revision is still" in plan.effect
    etcd.ctl("put", "--lease", format(lease, "x"), "/locks/cas", "second")  # a new mod revision

    operator = Operator("op", "op", None)
    log = AuditLog(tmp_path / "audit.jsonl", clock=SystemClock(), host="h", operator=operator)
    executor = Executor(log)
    outcome = executor.run(plan, "test", force=True)
    assert not outcome.ok and outcome.code == "changed", outcome.message
    assert etcd.ctl("get", "/locks/cas", "--print-value-only").strip() == "second"
    ttl = etcd_json(etcd, "/lease/timetolive", {"ID": str(lease)})
    assert int(ttl["TTL"]) > 0  # the lease was not revoked

    etcd.ctl("del", "/locks/cas")
    outcome = executor.run(plan, "test", force=True)
    assert not outcome.ok and outcome.code == "gone"


def test_waiters_cannot_be_broken_and_other_actions_are_refused(etcd: Etcd) -> None:
    _, key = holder_and_waiter(etcd, "/locks/queue")
    waiter = next(lock for lock in listing(etcd)["locks"] if lock["state"] == "waiting")
    code, _, err = run_cli("break", waiter["id"], "--etcd", etcd.url, "--reason", "x", "--yes")
    assert code == 1 and "holds nothing" in err
    code, _, err = run_cli("steal", ids.etcd_id(waiter["server"], key), "--reason", "x", "--yes")
    assert code == 1 and "offer break" in err
    assert len(etcd.keys("/locks/queue/")) == 2


def test_an_etcd_that_is_away_is_reported_not_crashed_on() -> None:
    from tests.stores.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = run_cli("ls", "--etcd", url, "--json")
    assert code == 1
    (source,) = json.loads(out)["sources"]
    assert source["kind"] == "etcd" and source["status"] == "disconnected"
    assert source["next_retry_at"] is not None
    assert "etcd 127.0.0.1" in err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://etcd:2379", "http:// or https://"),
        ("http://root:s3cret@etcd:2379", "not supported"),
        ("http://etcd:notaport", "not a usable URL"),
    ],
)
def test_bad_etcd_urls_are_usage_errors_without_their_secrets(url: str, message: str) -> None:
    code, _, err = run_cli("ls", "--etcd", url)
    assert code == 2 and message in err
    assert "s3cret" not in err


def test_many_leases_are_read_a_capped_batch_per_poll_the_rest_counted_down(
    etcd: Etcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35, item 6: 10,000 leases were 10,000 requests a poll. Past the cap a
    poll reads a batch of their times to live, those never read first, then those
    nearest their end; the others keep their last reading counted down on the
    poller's clock. A revoked lease is gone with its keys: no listing of the live
    leases is needed to tell (etcd deletes them in the revoke's revision)."""
    from datetime import UTC, datetime

    from lockwatch.clock import FrozenClock
    from lockwatch.sources.etcd import server as etcd_server
    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.gateway import Gateway

    monkeypatch.setattr(etcd_server, "LEASE_READS", 10)
    monkeypatch.setattr(etcd_server, "FEW_LEASES", 4)
    reads: list[int] = []
    time_to_live = Gateway.time_to_live

    def counted(self: Gateway, lease: int) -> tuple[int, int]:
        reads.append(lease)
        return time_to_live(self, lease)

    monkeypatch.setattr(Gateway, "time_to_live", counted)
    paths: list[str] = []
    call = Gateway.call

    def recorded(self: Gateway, path: str, body: dict[str, Any]) -> dict[str, Any]:
        paths.append(path)
        return call(self, path, body)

    monkeypatch.setattr(Gateway, "call", recorded)
    leases = []
    for number in range(25):
        lease = int(etcd_json(etcd, "/lease/grant", {"TTL": 600})["ID"])
        leases.append(lease)
        etcd.ctl("put", "--lease", format(lease, "x"), f"/locks/job-{number}", "w")
    clock = FrozenClock(datetime(2026, 1, 1, tzinfo=UTC))
    server = etcd_server.EtcdServer(parse(etcd.url), ("/locks/",), clock=clock)
    try:
        first = server.poll()
        assert first is not None and len(first.keys) == 25
        assert len(reads) == 10  # the cap, not one request per lease
        unread = [lease for lease, (left, _) in first.leases.items() if left is None]
        assert len(unread) == 15
        read_first = set(reads)

        clock.advance(30)
        reads.clear()
        second = server.poll()
        assert second is not None
        assert len(reads) == 10 and not set(reads) & read_first  # never read: first
        for lease in read_first:  # counted down from their reading, 30 s ago
            left, granted = second.leases[lease]
            was = first.leases[lease][0]
            assert granted == 600 and was is not None and left == was - 30

        etcd_json(etcd, "/lease/revoke", {"ID": str(leases[0])})
        etcd_json(etcd, "/lease/revoke", {"ID": str(leases[1])})
        clock.advance(30)
        reads.clear()
        for _ in range(2):
            server.poll()
        third = server.poll()
        assert third is not None
        assert len(third.keys) == 23 and leases[0] not in third.leases
        assert all(left is not None for left, _ in third.leases.values())
        assert "/lease/leases" not in paths and "/lease/timetolive" in paths

        from lockwatch.sources.etcd.records import to_locks
        from lockwatch.sources.stores.facts import StoreLock

        locks = to_locks(first)
        blank = next(lock for lock in locks if first.leases[lock.facts.lease][0] is None)  # type: ignore[union-attr]
        assert isinstance(blank.facts, StoreLock)
        verdict = blank.facts.judge(blank, None, clock.now(), "h")  # type: ignore[arg-type]
        assert verdict.state.value == "active"
        assert [r.code for r in verdict.reasons] == ["lease_unread"]
    finally:
        server.close()


def whole_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prefixes read whole (Gateway.range_prefix), from now on."""
    from lockwatch.sources.etcd.gateway import Gateway

    whole: list[str] = []
    range_prefix = Gateway.range_prefix

    def counted(self: Gateway, prefix: str, limit: int) -> tuple[int, list[Any], bool]:
        whole.append(prefix)
        return range_prefix(self, prefix, limit)

    monkeypatch.setattr(Gateway, "range_prefix", counted)
    return whole


def as_a_whole_read(etcd: Etcd, prefixes: tuple[str, ...], polled: Any) -> None:
    """`polled` lists what a poll reading the prefixes whole lists now."""
    from lockwatch.clock import SystemClock
    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.server import EtcdServer

    fresh = EtcdServer(parse(etcd.url), prefixes, clock=SystemClock())
    try:
        read = fresh.poll()
    finally:
        fresh.close()
    assert read is not None and read.revision == polled.revision
    assert polled.keys == read.keys  # in the order a whole read gives them
    assert set(polled.leases) == set(read.leases)


@pytest.mark.parametrize(("spans", "listed"), [(64, 2000), (2, 2000), (2, 0)])
def test_after_a_whole_read_a_poll_reads_what_was_written_since_and_sees_deletions(
    etcd: Etcd, monkeypatch: pytest.MonkeyPatch, spans: int, listed: int
) -> None:
    """Issue 35: a poll after a whole read asks etcd, in one transaction, for the
    keys written since and the count of keys in each span of a prefix, and lists
    a span's keys where its count is short; what it lists is what a whole read
    lists, after puts, re-puts, a key deleted and made again, a lease revoked.
    With more keys to list than `LISTED`, it reads the prefixes whole."""
    from lockwatch.clock import SystemClock
    from lockwatch.sources.etcd import since
    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.server import EtcdServer

    monkeypatch.setattr(since, "SPANS", spans)
    monkeypatch.setattr(since, "LISTED", listed)
    whole = whole_reads(monkeypatch)
    read_whole: list[str] = []
    prefixes = ("/locks/", "/locks/b", "/app/")  # overlapping, as operators may give them
    lease = int(etcd_json(etcd, "/lease/grant", {"TTL": 600})["ID"])
    etcd.ctl("put", "/locks/a", "1")
    etcd.ctl("put", "--lease", format(lease, "x"), "/locks/b/leased", "2")
    etcd.ctl("put", "/app/c", "3")
    etcd.ctl("put", "/app/d", "3")
    server = EtcdServer(parse(etcd.url), prefixes, clock=SystemClock())

    def same_as_a_whole_read(deleted: bool) -> None:
        whole.clear()
        polled = server.poll()
        assert polled is not None, server.status
        assert whole == [] or (deleted and not listed), whole
        read_whole.extend(whole)
        as_a_whole_read(etcd, prefixes, polled)

    try:
        first = server.poll()
        assert first is not None and len(first.keys) == 4
        same_as_a_whole_read(deleted=False)  # nothing written
        etcd.ctl("put", "/locks/a", "1 again")  # a new value, the same key
        etcd.ctl("put", "/locks/new", "4")
        etcd.ctl("put", "/locks/b/new", "5")  # under two of the prefixes
        same_as_a_whole_read(deleted=False)
        etcd.ctl("del", "/locks/new")
        etcd.ctl("put", "/locks/new", "made again")
        same_as_a_whole_read(deleted=False)  # deleted and made again: written since
        etcd.ctl("del", "/app/c")
        same_as_a_whole_read(deleted=True)
        etcd.ctl("del", "/locks/a")  # one gone, one new: as many keys as before the two
        etcd.ctl("put", "/locks/0", "7")
        same_as_a_whole_read(deleted=True)
        etcd_json(etcd, "/lease/revoke", {"ID": str(lease)})  # etcd deletes its key
        same_as_a_whole_read(deleted=True)
        etcd.ctl("put", "/unwatched/x", "6")  # outside the prefixes: nothing to read
        same_as_a_whole_read(deleted=False)
        etcd.ctl("del", "--prefix", "/app/")  # a prefix left with no key
        same_as_a_whole_read(deleted=True)
        etcd.ctl("put", "/app/e", "8")
        same_as_a_whole_read(deleted=False)
        assert bool(read_whole) == (not listed)  # with none to list: some whole reads
    finally:
        server.close()


@pytest.mark.parametrize(("small", "most_gone"), [(16, 12), (3, 60)])
def test_releases_and_acquisitions_between_polls_are_listed_as_a_whole_read(
    etcd: Etcd, monkeypatch: pytest.MonkeyPatch, small: int, most_gone: int
) -> None:
    """300 keys in spans of 20, then polls with keys deleted, made and written
    again between them at random (a fixed seed): every poll lists what a whole
    read lists, and none reads a prefix whole; with up to 60 keys gone a poll and
    spans cut again down to 3 keys, the spans short are cut in rounds."""
    import random

    from lockwatch.clock import SystemClock
    from lockwatch.sources.etcd import since
    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.gateway import encode
    from lockwatch.sources.etcd.server import EtcdServer

    def txn(operations: list[dict[str, Any]]) -> None:
        for start in range(0, len(operations), 100):
            etcd_json(etcd, "/kv/txn", {"success": operations[start : start + 100]})

    def put(key: str, value: str) -> dict[str, Any]:
        return {"request_put": {"key": encode(key), "value": encode(value)}}

    def delete(key: str) -> dict[str, Any]:
        return {"request_delete_range": {"key": encode(key)}}

    monkeypatch.setattr(since, "SPANS", 15)
    monkeypatch.setattr(since, "SMALL", small)
    monkeypatch.setattr(since, "CUTS", 40)  # a round's parts in transactions of 128
    monkeypatch.setattr(since, "TXN_OPS", 16)  # ... of 16 here, so several a round
    whole = whole_reads(monkeypatch)
    chance = random.Random(35)
    keys = [f"/locks/job-{number:03d}" for number in range(300)]
    txn([put(key, "v0") for key in keys])
    server = EtcdServer(parse(etcd.url), ("/locks/",), clock=SystemClock())
    try:
        assert server.poll() is not None
        for round_ in range(8):
            whole.clear()
            gone = chance.sample(keys, chance.randint(1, most_gone))
            keys = [key for key in keys if key not in gone]
            made = [f"/locks/job-{chance.randrange(1000):03d}x{round_}" for _ in range(5)]
            changed = chance.sample(keys, 5)
            again = gone[:1]  # deleted, then made again
            txn([delete(key) for key in gone] + [put(key, f"v{round_}") for key in made])
            txn([put(key, f"v{round_}") for key in changed + again])
            keys = sorted(set(keys + made + again))
            polled = server.poll()
            assert polled is not None, server.status
            assert whole == [], round_
            assert [kv.key for kv in polled.keys] == keys
            as_a_whole_read(etcd, ("/locks/",), polled)
    finally:
        server.close()


def test_records_kept_across_polls_are_the_records_made_afresh() -> None:
    """A poller keeps what each key alone decides (its id, digest, holder) while
    the key is unchanged; a changed value, a new holder after a release, a key
    read again as a new object: each poll's records are those made from nothing."""
    from datetime import UTC, datetime, timedelta

    from lockwatch.sources.etcd.gateway import KeyValue
    from lockwatch.sources.etcd.records import Records, to_locks
    from lockwatch.sources.etcd.server import EtcdSnapshot

    at = datetime(2026, 1, 1, tzinfo=UTC)
    app = KeyValue("/locks/app", "token-1", 5, 5, 1, 0)
    holder = KeyValue("/locks/m/1f", "", 6, 6, 1, 0x1F)
    waiter = KeyValue("/locks/m/2a", "", 7, 7, 1, 0x2A)
    first = EtcdSnapshot("e:2379", at, 7, [app, holder, waiter], {0x1F: (30, 60), 0x2A: (None, 0)})
    changed = KeyValue("/locks/app", "token-2", 5, 8, 2, 0)  # the same key, written again
    again = KeyValue(*(getattr(waiter, name) for name in KeyValue.__slots__))  # read again
    second = EtcdSnapshot(
        "e:2379", at + timedelta(seconds=2), 9, [changed, again], {0x2A: (12, 60)}
    )
    records = Records()
    for snapshot in (first, second, first):
        kept, fresh = records.to_locks(snapshot), to_locks(snapshot)
        assert kept == fresh
        assert [lock.content for lock in kept] == [lock.content for lock in fresh]
        assert [lock.facts for lock in kept] == [lock.facts for lock in fresh]
    before = {lock.id: lock for lock in to_locks(first)}
    after = {lock.id: lock for lock in to_locks(second)}
    assert before["etcd:e:2379:/locks/app"].sha256 != after["etcd:e:2379:/locks/app"].sha256
    promoted = after["etcd:e:2379:/locks/m/2a"]  # the waiter holds it once the holder is gone
    assert promoted.facts.position == 0 and promoted.facts.blocked_by == ()  # type: ignore[union-attr]


def test_a_lease_ended_between_the_keys_and_its_time_to_live_is_judged_unknown(
    etcd: Etcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keys say each lease was alive at their revision; one revoked right
    after (here: just before its time to live is read) is read gone, and its lock
    is `unknown` (expired), never `active` on a guess."""
    from lockwatch.clock import SystemClock
    from lockwatch.model.process import StaticProcesses
    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.gateway import Gateway
    from lockwatch.sources.etcd.poller import EtcdPoller
    from lockwatch.sources.etcd.server import EtcdServer

    lease = int(etcd_json(etcd, "/lease/grant", {"TTL": 600})["ID"])
    etcd.ctl("put", "--lease", format(lease, "x"), "/locks/job", "w")
    time_to_live = Gateway.time_to_live

    def revoked_first(self: Gateway, asked: int) -> tuple[int, int]:
        etcd_json(etcd, "/lease/revoke", {"ID": str(asked)})
        return time_to_live(self, asked)

    monkeypatch.setattr(Gateway, "time_to_live", revoked_first)
    poller = EtcdPoller(EtcdServer(parse(etcd.url), ("/locks/",), clock=SystemClock()))
    try:
        polled = poller.poll()
        assert polled.locks is not None
        (lock,) = polled.locks
        assert lock.facts is not None
        verdict = lock.facts.judge(lock, StaticProcesses(), polled.at, "h")
        assert verdict is not None and verdict.state.value == "unknown"
        assert [reason.code for reason in verdict.reasons] == ["expired"]
    finally:
        poller.close()


def test_a_kept_range_answers_the_same_keyvalue_only_for_a_key_answered_alike(
    etcd: Etcd,
) -> None:
    """With `keep`, a key etcd answers field for field as in the last range of
    its prefix is that range's very KeyValue; one written since (a new value, the
    same value written again, deleted and made again) is read afresh."""
    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.gateway import Gateway

    for number in range(4):
        etcd.ctl("put", f"/locks/k{number}", "v")
    kept, plain = Gateway(parse(etcd.url), keep=True), Gateway(parse(etcd.url))
    try:
        _, first, _ = kept.range_prefix("/locks/", 100)
        etcd.ctl("put", "/locks/k1", "w")
        etcd.ctl("put", "/locks/k2", "v")  # the same value, written again
        etcd.ctl("del", "/locks/k3")
        etcd.ctl("put", "/locks/k3", "v")
        _, second, _ = kept.range_prefix("/locks/", 100)
        _, other, _ = kept.range_prefix("/app/", 100)  # another prefix keeps its own
        _, fresh, _ = plain.range_prefix("/locks/", 100)
        assert second == fresh and other == []
        assert [a is b for a, b in zip(first, second, strict=True)] == [True, False, False, False]
        assert (second[1].value, second[2].version, second[3].version) == ("w", 2, 1)
        _, third, _ = kept.range_prefix("/locks/", 100)
        assert all(a is b for a, b in zip(second, third, strict=True))
        again = plain.range_prefix("/locks/", 100)[1]  # without `keep`: made afresh
        assert not any(a is b for a, b in zip(fresh, again, strict=True))
    finally:
        kept.close()
        plain.close()
