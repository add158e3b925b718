"""kazoo's `NonBlockingLease` (and `MultiNonBlockingLease`), driven for real
against the throwaway ZooKeeper: the lease is a persistent `lease_holder` znode
under the lease path whose data is JSON (`holder`, and `end` by the holder's UTC
clock), written under a kazoo `Lock` held only while it is obtained. Until its
end it is held; past it, kazoo gives it to the next identifier that asks."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from tests.conftest import run_cli
from tests.zookeeper.conftest import Area
from tests.zookeeper.test_zookeeper import by_identifier, listing


def _utc_now() -> datetime.datetime:
    # kazoo's own default clock is datetime.utcnow (naive UTC): the same instants.
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def _lease(client: Any, path: str, identifier: str, **duration: float) -> Any:
    lease = client.NonBlockingLease(
        path, datetime.timedelta(**duration), identifier=identifier, utcnow=_utc_now
    )
    assert lease, f"kazoo did not grant {path} to {identifier}"
    return lease


def test_a_kazoo_lease_is_held_until_its_end(zk: Area) -> None:
    a = zk.zk.client()
    path = zk.path("hourly")
    _lease(a, path, "cleanup on host-1", minutes=70)
    _, stat = a.get(f"{path}/lease_holder")
    (lease,) = listing(zk)["locks"]
    assert (lease["format"], lease["name"], lease["state"]) == ("kazoo-lease", path, "active")
    assert lease["identifier"] == "cleanup on host-1"
    assert lease["holder"]["actor"] == "cleanup on host-1"
    assert lease["znode"] == f"{path}/lease_holder" and lease["czxid"] == stat.czxid
    assert lease["mode"] == "lease" and lease["library"] == "kazoo"
    end = datetime.datetime.fromisoformat(lease["lease_end"])
    assert datetime.timedelta(minutes=69) < end - datetime.datetime.now(datetime.UTC)
    assert lease["expires_at"] is not None and lease["next_change_at"] is not None
    # Another identifier is refused it, as kazoo says: the lease is held.
    b = zk.zk.client()
    refused = b.NonBlockingLease(
        path, datetime.timedelta(minutes=1), identifier="other", utcnow=_utc_now
    )
    assert not refused


def test_a_kazoo_lease_past_its_end_is_stale_and_breaks_without_force(
    zk: Area, tmp_path: Path
) -> None:
    a = zk.zk.client()
    path = zk.path("nightly")
    back = _utc_now() - datetime.timedelta(minutes=5)
    lease = a.NonBlockingLease(
        path, datetime.timedelta(minutes=1), identifier="night-job", utcnow=lambda: back
    )
    assert lease
    (held,) = listing(zk)["locks"]
    assert held["state"] == "stale"
    assert [r["code"] for r in held["reasons"]] == ["lease_expired"]
    audit = tmp_path / "audit.jsonl"
    args = ("--zk", zk.zk.connect, "--reason", "expired", "--yes", "--audit-log", str(audit))
    code, _, err = run_cli("break", held["id"], *args)
    assert code == 0, err
    assert not a.exists(f"{path}/lease_holder")
    record = json.loads(audit.read_text().splitlines()[-1])
    assert record["result"] == "success" and record["target"]["znode"] == held["znode"]


def test_a_multi_lease_is_one_lease_per_slot(zk: Area) -> None:
    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("pool")
    for client, name in ((a, "worker-a"), (b, "worker-b")):
        assert client.MultiNonBlockingLease(
            2, path, datetime.timedelta(minutes=10), identifier=name, utcnow=_utc_now
        )
    locks = by_identifier(zk)
    assert {locks[n]["name"] for n in ("worker-a", "worker-b")} == {f"{path}/0", f"{path}/1"}
    assert {locks[n]["state"] for n in ("worker-a", "worker-b")} == {"active"}


def test_a_live_kazoo_lease_needs_force_and_says_what_breaking_does(zk: Area) -> None:
    from tests.zookeeper.test_zookeeper import _plan

    a = zk.zk.client()
    path = zk.path("held")
    _lease(a, path, "busy", minutes=30)
    (held,) = listing(zk)["locks"]
    plan = _plan(zk, held["id"])
    assert plan.needs_name
    assert "any other identifier may take it at once" in plan.effect


def test_serve_says_how_long_a_kazoo_lease_is_past_its_end(zk: Area) -> None:
    from tests.zookeeper.test_surfaces import scraped

    a = zk.zk.client()
    late, due = zk.path("late"), zk.path("due")
    back = _utc_now() - datetime.timedelta(minutes=5)
    assert a.NonBlockingLease(
        late, datetime.timedelta(minutes=1), identifier="late-job", utcnow=lambda: back
    )
    _lease(a, due, "on-time", minutes=30)
    samples = scraped(zk)
    server = ("server", f"zookeeper:{zk.zk.connect}")
    overdue = {
        dict(labels)["name"]: value
        for (metric, labels), value in samples.items()
        if metric == "lockwatch_zk_lease_overdue_seconds" and server in labels
    }
    assert overdue[due] == 0
    assert 3 * 60 < overdue[late] < 10 * 60
    assert samples[("lockwatch_zk_holder_age_seconds", (("name", late), server))] >= 0
