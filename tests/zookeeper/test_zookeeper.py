"""ZooKeeper as a lock source, against a throwaway ZooKeeper (Debian's package)
with kazoo's recipes driven for real: holders and queues as each library decides
them, sessions' clients from `cons`, a killed holder, and compare-and-swap breaks.

Curator's layouts (Java, not installed here) are reproduced from the node names
its recipes write (`_c_<uuid>-lock-<seq>`, `__READ__`/`__WRIT__`, `latch-`,
`leases/…-lease-`): said so in each such test."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from lockwatch.model.action import Asked, Kind, Plan
from lockwatch.sources.zookeeper import ids
from tests.conftest import run_cli
from tests.zookeeper.conftest import Area, ZooKeeper, four, until


def listing(area: Area, *args: str) -> dict[str, Any]:
    code, out, err = run_cli("ls", "--zk", area.zk.connect, "--zk-path", area.root, "--json", *args)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def by_identifier(area: Area) -> dict[str, dict[str, Any]]:
    return {lock["identifier"]: lock for lock in listing(area)["locks"] if lock["identifier"]}


def children(client: Any, path: str) -> list[str]:
    return list(client.get_children(path)) if client.exists(path) else []


def queued(client: Any, lock: Any, count: int, path: str) -> threading.Thread:
    """`lock.acquire()` in a thread, once the lock path has `count` contenders."""

    def acquire() -> None:
        # The test's teardown stops its client under a waiter: not the test's failure.
        with contextlib.suppress(Exception):
            lock.acquire()

    thread = threading.Thread(target=acquire, daemon=True)
    thread.start()
    until(lambda: len(children(client, path)) >= count, f"{count} contenders under {path}")
    return thread


def session_hex(client: Any) -> str:
    return f"0x{client.client_id[0]:x}"


def test_a_kazoo_lock_holder_and_its_queue_as_zookeeper_has_them(zk: Area) -> None:
    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("deploy")
    assert a.Lock(path, "alpha").acquire(timeout=10)
    queued(b, b.Lock(path, "beta"), 2, path)
    document = listing(zk)
    locks = {lock["identifier"]: lock for lock in document["locks"]}
    held, waiter = locks["alpha"], locks["beta"]

    node = next(n for n in children(a, path) if a.get(f"{path}/{n}")[0] == b"alpha")
    _, stat = a.get(f"{path}/{node}")
    assert held["id"] == ids.zk_id(zk.zk.connect, f"{path}/{node}")
    assert (held["source"], held["format"], held["name"]) == ("zookeeper", "kazoo-lock", path)
    assert held["state"] == "active" and held["czxid"] == stat.czxid
    assert held["ephemeral_owner"] == session_hex(a) == held["holder"]["session"]
    # The client ZooKeeper has for the session: cons, as the server says it.
    assert held["session_state"] == "connected"
    assert held["client"] and held["client"] in four(zk.zk.port, b"cons")
    assert [r["code"] for r in held["reasons"]] == ["blocking"]
    assert held["blocking"] == [session_hex(b)]

    assert waiter["state"] == "waiting" and waiter["name"] == path
    assert waiter["blocked_by"] == [session_hex(a)] and waiter["position"] == 1
    assert [r["code"] for r in waiter["reasons"]] == ["waiting"]

    trees = [t for t in document["blocking"] if zk.zk.connect in t["server"]]
    assert len(trees) == 1, document["blocking"]
    (tree,) = trees
    (root,) = tree["roots"]
    assert root["id"] == session_hex(a)
    assert [w["id"] for w in root["waiters"]] == [session_hex(b)]


def test_readers_share_a_kazoo_read_lock_and_the_writer_waits_for_both(zk: Area) -> None:
    a, b, c = zk.zk.client(), zk.zk.client(), zk.zk.client()
    path = zk.path("catalog")
    assert a.ReadLock(path, "reader-1").acquire(timeout=10)
    assert b.ReadLock(path, "reader-2").acquire(timeout=10)
    queued(c, c.WriteLock(path, "writer"), 3, path)
    locks = by_identifier(zk)
    assert {locks[r]["state"] for r in ("reader-1", "reader-2")} == {"active"}
    assert {locks[r]["mode"] for r in ("reader-1", "reader-2")} == {"read"}
    writer = locks["writer"]
    assert writer["format"] == "kazoo-rwlock" and writer["mode"] == "write"
    assert writer["state"] == "waiting"
    assert sorted(writer["blocked_by"]) == sorted([session_hex(a), session_hex(b)])


def test_a_kazoo_semaphore_holds_its_leases_and_queues_the_rest(zk: Area) -> None:
    a, b, c = zk.zk.client(), zk.zk.client(), zk.zk.client()
    path = zk.path("workers")
    assert a.Semaphore(path, "w1", max_leases=2).acquire(timeout=10)
    assert b.Semaphore(path, "w2", max_leases=2).acquire(timeout=10)
    queued(c, c.Semaphore(path, "w3", max_leases=2), 1, f"{path}-__lock__")
    locks = listing(zk)["locks"]
    leases = [lock for lock in locks if lock["format"] == "kazoo-semaphore"]
    assert sorted(lock["identifier"] for lock in leases) == ["w1", "w2"]
    assert {lock["state"] for lock in leases} == {"active"}
    assert {lock["max_leases"] for lock in leases} == {2}
    (waiter,) = [lock for lock in locks if lock["state"] == "waiting"]
    # kazoo's semaphore queues its contenders with a lock at <path>-__lock__: its
    # holder waits for a lease, so it is the semaphore's waiter, not a holder.
    assert waiter["name"] == path and waiter["znode"].startswith(f"{path}-__lock__/")
    assert sorted(waiter["blocked_by"]) == sorted([session_hex(a), session_hex(b)])
    assert all(lock["blocking"] == [session_hex(c)] for lock in leases)


def test_a_kazoo_election_leader_and_its_candidates(zk: Area) -> None:
    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("election")
    leading, done = threading.Event(), threading.Event()

    def lead() -> None:
        leading.set()
        done.wait(30)

    threading.Thread(target=a.Election(path, "node-a").run, args=(lead,), daemon=True).start()
    assert leading.wait(30)
    election = b.Election(path, "node-b")
    threading.Thread(target=election.run, args=(lambda: None,), daemon=True).start()
    until(lambda: len(children(b, path)) == 2, "the second candidate")
    try:
        assert election.contenders() == ["node-a", "node-b"]  # kazoo's own word
        locks = by_identifier(zk)
        assert locks["node-a"]["state"] == "active"
        assert locks["node-b"]["state"] == "waiting"
        assert locks["node-b"]["blocked_by"] == [session_hex(a)]
    finally:
        done.set()
        election.cancel()


def _curator(client: Any, path: str, name: str, data: bytes = b"") -> str:
    """A node as Curator's protected create writes it: `_c_<uuid>-<name><seq>`,
    ephemeral and sequential (a reproduction of its layout: Curator is Java)."""
    made: str = client.create(
        f"{path}/_c_{uuid.uuid4()}-{name}", data, ephemeral=True, sequence=True, makepath=True
    )
    return made


def test_curator_mutex_rwlock_latch_and_semaphore_layouts(zk: Area) -> None:
    """Curator's recipes reproduced from the names they write (Curator itself is
    Java and not installed here): `InterProcessMutex` `lock-`, `InterProcessReadWriteLock`
    `__READ__`/`__WRIT__`, `LeaderLatch` `latch-`, `InterProcessSemaphoreV2`
    `leases/…-lease-` queued by `locks/…-lock-`."""
    a, b = zk.zk.client(), zk.zk.client()
    mutex, rw, latch, sem = (zk.path(n) for n in ("mutex", "rw", "latch", "sem"))
    first = _curator(a, mutex, "lock-", b"app-1")
    _curator(b, mutex, "lock-", b"app-2")
    _curator(a, rw, "__READ__", b"r1")
    _curator(b, rw, "__WRIT__", b"w1")
    _curator(b, rw, "__READ__", b"r2")
    _curator(a, latch, "latch-", b"leader")
    _curator(b, latch, "latch-", b"follower")
    _curator(a, f"{sem}/leases", "lease-", b"lease-a")
    _curator(b, f"{sem}/leases", "lease-", b"lease-b")
    locks = by_identifier(zk)
    assert locks["app-1"]["format"] == "curator-mutex" and locks["app-1"]["state"] == "active"
    assert locks["app-1"]["znode"] == first
    assert locks["app-2"]["state"] == "waiting"
    # A reader before the writer holds; the reader after it waits for it.
    assert (locks["r1"]["state"], locks["w1"]["state"], locks["r2"]["state"]) == (
        "active",
        "waiting",
        "waiting",
    )
    assert locks["r2"]["blocked_by"] == [session_hex(b)]
    assert locks["leader"]["format"] == "curator-latch" and locks["leader"]["state"] == "active"
    assert locks["follower"]["state"] == "waiting"
    assert {locks[n]["state"] for n in ("lease-a", "lease-b")} == {"active"}
    assert locks["lease-a"]["format"] == "curator-semaphore"


def test_kazoo_and_curator_on_one_path_are_two_holders(zk: Area) -> None:
    """A Python service (kazoo) and a Java one (Curator's layout, reproduced) lock
    one path: each library's rule gives its own contender the lock."""
    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("shared")
    assert a.Lock(path, "python").acquire(timeout=10)
    _curator(b, path, "lock-", b"java")
    locks = by_identifier(zk)
    assert locks["python"]["state"] == locks["java"]["state"] == "invalid"
    assert [r["code"] for r in locks["python"]["reasons"]][:1] == ["two_holders"]
    assert locks["python"]["also_holding"] == [locks["java"]["znode"].rsplit("/", 1)[1]]


def test_a_persistent_holder_is_unknown_it_has_no_session(zk: Area) -> None:
    """A persistent holder node is held until deleted: kazoo's own acquire(ephemeral=False)
    takes one on purpose, and a dead client's restore leaves the same node. Nothing in
    ZooKeeper tells the two apart: unknown, never stale, and its break needs --force."""
    a, b, c = zk.zk.client(), zk.zk.client(), zk.zk.client()
    path = zk.path("jobs")
    assert a.Lock(path, "ghost").acquire(timeout=10, ephemeral=False)
    queued(b, b.Lock(path, "live"), 2, path)
    locks = by_identifier(zk)
    assert locks["ghost"]["state"] == "unknown"
    assert "ephemeral=False" in locks["ghost"]["reasons"][0]["message"]
    # The same node written by hand (a client's bug, a restore) reads the same.
    other = zk.path("jobs2")
    c.create(f"{other}/{uuid.uuid4().hex}__lock__", b"ghost2", sequence=True, makepath=True)
    assert by_identifier(zk)["ghost2"]["state"] == "unknown"
    locks = by_identifier(zk)
    assert locks["ghost"]["state"] == "unknown"
    assert [r["code"] for r in locks["ghost"]["reasons"]][:1] == ["no_session"]
    assert locks["ghost"]["ephemeral_owner"] is None
    assert locks["live"]["state"] == "waiting"


def test_an_empty_lock_parent_is_an_orphan_and_its_break_deletes_it_only_while_empty(
    zk: Area, tmp_path: Path
) -> None:
    a = zk.zk.client()
    path = zk.path("nightly-lock")
    lock = a.Lock(path, "once")
    assert lock.acquire(timeout=10)
    lock.release()  # kazoo never deletes the lock path (Curator#307's kin)
    (orphan,) = listing(zk)["locks"]
    assert (orphan["state"], orphan["format"], orphan["name"]) == (
        "invalid",
        "zk-orphaned-parent",
        path,
    )
    assert [r["code"] for r in orphan["reasons"]] == ["orphaned_parent"]
    args = (
        "--zk",
        zk.zk.connect,
        "--reason",
        "cleanup",
        "--yes",
        "--audit-log",
        str(tmp_path / "a"),
    )
    code, _, err = run_cli("break", orphan["id"], *args)
    assert code == 0, err
    assert not a.exists(path)


def test_a_killed_holder_is_stale_and_its_break_hands_the_lock_to_the_waiter(
    zk: Area, tmp_path: Path
) -> None:
    b = zk.zk.client()
    path = zk.path("migrate")
    holder = zk.zk.holder("lock", path, "doomed", "60")
    lock = b.Lock(path, "next")
    thread = queued(b, lock, 2, path)
    holder.kill()  # its TCP connection closes; its session lives on for up to 60 s
    holder.wait()
    until(lambda: by_identifier(zk)["doomed"]["state"] == "stale", "the dead holder's verdict")
    doomed = by_identifier(zk)["doomed"]
    assert [r["code"] for r in doomed["reasons"]] == ["session_gone", "blocking"]
    assert doomed["session_state"] == "disconnected" and doomed["client"] is None
    audit = tmp_path / "audit.jsonl"
    code, _, err = run_cli(
        "break", doomed["id"], "--zk", zk.zk.connect, "--reason", "holder died, INC-7", "--yes",
        "--audit-log", str(audit),
    )  # fmt: skip
    assert code == 0, err
    thread.join(30)
    assert lock.is_acquired  # kazoo's waiter woke on its watch and holds the lock
    record = [json.loads(line) for line in audit.read_text().splitlines()][-1]
    assert record["target"]["source"] == "zookeeper" and record["result"] == "success"
    assert record["target"]["znode"] == doomed["znode"]


def test_a_live_holder_is_broken_only_with_force_and_its_effect_is_said(
    zk: Area, tmp_path: Path
) -> None:
    a = zk.zk.client()
    path = zk.path("live")
    assert a.Lock(path, "alive").acquire(timeout=10)
    (held,) = listing(zk)["locks"]
    args = ("--zk", zk.zk.connect, "--reason", "x", "--yes", "--audit-log", str(tmp_path / "a"))
    code, _, err = run_cli("break", held["id"], *args)
    assert code == 1 and "--force" in err, err
    assert children(a, path)
    # What the confirmation says it does: the client is not told, and keeps working.
    plan = _plan(zk, held["id"])
    assert plan.needs_name
    assert f"Session {session_hex(a)} at {held['client']} is connected" in plan.effect
    assert "goes on believing it holds" in plan.effect
    code, _, err = run_cli("break", held["id"], *args, "--force")
    assert code == 0, err
    assert not children(a, path)


def test_a_node_gone_or_made_again_under_a_confirmation_is_refused(zk: Area) -> None:
    """Compare-and-swap: the plan was made on the node seen; by the time it runs
    the node is gone (released), or a node of the same name is another (czxid)."""
    from lockwatch.model.action import ActionRefused, Doing
    from lockwatch.sources.zookeeper.actions import ACTIONS
    from lockwatch.sources.zookeeper.endpoint import REACH, Reach, parse

    a = zk.zk.client()
    path = zk.path("cas")
    # A Curator-named node at a fixed name (no sequence), so it can be made again.
    node = f"{path}/_c_{uuid.uuid4()}-lock-0000000007"
    a.create(node, b"first", makepath=True)
    lock_id = ids.zk_id(zk.zk.connect, node)
    plan = _plan(zk, lock_id)
    assert plan.verdict.state.value == "unknown"  # a persistent node: no session
    reach = {REACH: Reach({zk.zk.connect: parse(zk.zk.connect)})}
    a.delete(node)
    a.create(node, b"second")
    with pytest.raises(ActionRefused) as refused:
        ACTIONS.run(plan, Doing("a1", "s1", reach=reach))
    assert refused.value.code == "changed" and "czxid" in refused.value.message
    assert a.get(node)[0] == b"second"
    a.delete(node)
    with pytest.raises(ActionRefused) as refused:
        ACTIONS.run(plan, Doing("a2", "s2", reach=reach))
    assert refused.value.code == "gone"


def _plan(area: Area, lock_id: str) -> Plan:
    """The break of `lock_id` as the CLI plans it: the lock found and judged now."""
    from lockwatch.config import Config
    from lockwatch.sources.contract import Wanted
    from lockwatch.sources.zookeeper.actions import ACTIONS
    from lockwatch.sources.zookeeper.plugin import SOURCE

    wanted = Wanted((), {"zk_servers": (area.zk.connect,)}, Config(), {})
    found = SOURCE.find(lock_id, wanted, "host")
    assert not isinstance(found, str)
    lock, verdict, peers = found
    return ACTIONS.plan(Kind.BREAK, lock, verdict, Asked(peers))


def test_without_cons_whitelisted_the_client_is_unknown_naming_the_line(zk_plain: Area) -> None:
    a = zk_plain.zk.client()
    path = zk_plain.path("quiet")
    assert a.Lock(path, "held").acquire(timeout=10)
    (held,) = listing(zk_plain)["locks"]
    # The node exists: its session is alive as ZooKeeper and kazoo see it.
    assert held["state"] == "active" and held["session_state"] == "unknown"
    assert held["client"] is None
    assert "4lw.commands.whitelist=srvr,cons" in held["client_unknown_because"]
    assert [r["code"] for r in held["reasons"]] == ["client_unknown"]


def test_a_server_that_stops_answering_is_a_deadline_and_one_line(
    zk_throwaway: ZooKeeper,
) -> None:
    area = Area(zk_throwaway, "/")
    zk_throwaway.client().Lock("/stuck", "x").acquire(timeout=10)
    zk_throwaway.pause()  # SIGSTOP: connections open, nothing answers
    try:
        code, out, err = run_cli("ls", "--zk", zk_throwaway.connect, "--json")
    finally:
        zk_throwaway.resume()
    assert code == 1 and err.count("\n") == 1, err  # as for every server that is away
    assert f"zookeeper 127.0.0.1:{zk_throwaway.port}" in err
    document = json.loads(out)
    (status,) = document["sources"]
    assert status["kind"] == "zookeeper" and status["status"] == "disconnected"
    assert "no answer within" in status["reason"]
    assert "\n" not in status["reason"]
    assert document["locks"] == []
    assert area.root == "/"


def test_a_server_that_stops_answering_mid_watch_misses_the_polls_deadline(
    zk_throwaway: ZooKeeper,
) -> None:
    """The dashboard's connection, made while the server answered: a read that
    gets no answer ends at the poll's deadline, the status says so, and the next
    poll after the server is back answers again."""
    from lockwatch.sources.zookeeper.endpoint import parse
    from lockwatch.sources.zookeeper.server import ZkServer

    zk_throwaway.client().Lock("/stuck", "x").acquire(timeout=10)
    server = ZkServer(parse(zk_throwaway.connect), deadline=3.0)
    try:
        assert server.poll() is not None
        zk_throwaway.pause()
        try:
            assert server.poll() is None
        finally:
            zk_throwaway.resume()
        assert server.status.state == "disconnected"
        assert server.status.reason == "no answer within the poll's deadline"
        assert server.status.updated_at is not None  # what is shown is that old
        snapshot = until(server.poll, "a poll answered after the server came back")
        assert [p.path for p in snapshot.parents] == ["/stuck"]
    finally:
        server.close()


def test_a_suspended_session_holder_is_stale(zk: Area) -> None:
    """A holder whose connection is cut (a network partition: its kazoo client is
    SUSPENDED, its session not yet expired) holds a node no client stands behind."""
    from tests.zookeeper.proxy import Proxy

    proxy = Proxy(zk.zk.port)
    try:
        from kazoo.client import KazooClient

        client = KazooClient(f"127.0.0.1:{proxy.port}", timeout=60)
        client.start(timeout=30)
        zk.zk.clients.append(client)
        states: list[str] = []
        client.add_listener(states.append)
        path = zk.path("partitioned")
        assert client.Lock(path, "cut-off").acquire(timeout=10)
        proxy.cut()
        until(lambda: "SUSPENDED" in states, "kazoo to suspend the session")
        until(lambda: by_identifier(zk)["cut-off"]["state"] == "stale", "the verdict")
        assert [r["code"] for r in by_identifier(zk)["cut-off"]["reasons"]] == ["session_gone"]
    finally:
        proxy.close()


def test_when_a_dead_holders_session_expires_its_waiter_holds_the_lock(zk: Area) -> None:
    """No break: ZooKeeper expires the killed holder's session (2 s) and deletes
    its node; kazoo's waiter takes the lock, and the listing follows."""
    b = zk.zk.client()
    path = zk.path("expiring")
    holder = zk.zk.holder("lock", path, "short-lived", "2")
    lock = b.Lock(path, "successor")
    thread = queued(b, lock, 2, path)
    holder.kill()
    holder.wait()
    thread.join(30)
    assert lock.is_acquired
    locks = by_identifier(zk)
    assert "short-lived" not in locks
    assert locks["successor"]["state"] == "active" and locks["successor"]["position"] == 0


def test_a_tree_past_the_bound_is_read_in_part_and_said_so(
    zk: Area, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockwatch.sources.zookeeper import server

    a = zk.zk.client()
    for n in range(6):
        a.ensure_path(zk.path(f"dir{n}/sub"))
    monkeypatch.setattr(server, "MAX_NODES", 4)
    code, out, err = run_cli("ls", "--zk", zk.zk.connect, "--zk-path", zk.root, "--json")
    assert code == 1 and "over 4 znodes" in err  # part of the picture: said, never "no locks"
    (status,) = json.loads(out)["sources"]
    assert status["status"] == "connected" and "over 4 znodes" in status["reason"]
    assert "--zk-path" in status["reason"]


def test_an_ensemble_with_servers_zk_does_not_name_leaves_a_missing_session_unknown(
    zk: Area, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session absent from the named servers' cons may be connected to another:
    never `stale` then. (The throwaway server is standalone, its /zookeeper/config
    empty: the test gives the config reader a three-server ensemble's lines.)"""
    from lockwatch.sources.zookeeper import server

    path = zk.path("ensemble")
    holder = zk.zk.holder("lock", path, "elsewhere", "60")
    holder.kill()
    holder.wait()
    until(lambda: by_identifier(zk)["elsewhere"]["state"] == "stale", "the dead holder")
    lines = "\n".join(f"server.{n}=zk{n}:2888:3888:participant;0.0.0.0:2181" for n in (1, 2, 3))
    assert server.ensemble(lines) == [
        f"zk{n}:2888:3888:participant;0.0.0.0:2181" for n in (1, 2, 3)
    ]
    real = server.ensemble
    monkeypatch.setattr(server, "ensemble", lambda config: real(config or lines))
    elsewhere = by_identifier(zk)["elsewhere"]
    assert elsewhere["state"] == "active" and elsewhere["session_state"] == "unknown"
    assert "the ensemble has 3 servers" in elsewhere["client_unknown_because"]
    assert [r["code"] for r in elsewhere["reasons"]] == ["client_unknown"]


def test_a_lock_path_under_another_is_found_too(zk: Area) -> None:
    a = zk.zk.client()
    outer, inner = zk.path("outer"), zk.path("outer/inner")
    assert a.Lock(outer, "outer-holder").acquire(timeout=10)
    assert a.Lock(inner, "inner-holder").acquire(timeout=10)
    locks = by_identifier(zk)
    assert (locks["outer-holder"]["name"], locks["inner-holder"]["name"]) == (outer, inner)


def test_a_break_on_a_server_that_stopped_answering_fails_in_one_line(
    zk_throwaway: ZooKeeper,
) -> None:
    from lockwatch.model.action import ActionFailed, Doing
    from lockwatch.sources.zookeeper.actions import ACTIONS
    from lockwatch.sources.zookeeper.endpoint import REACH, Reach, parse

    area = Area(zk_throwaway, "/paused")
    client = zk_throwaway.client()
    node = client.create(
        f"{area.root}/{uuid.uuid4().hex}__lock__", b"ghost", sequence=True, makepath=True
    )
    plan = _plan(area, ids.zk_id(zk_throwaway.connect, node))
    zk_throwaway.pause()
    try:
        with pytest.raises(ActionFailed) as failed:
            reach = {REACH: Reach({zk_throwaway.connect: parse(zk_throwaway.connect)})}
            ACTIONS.run(plan, Doing("a1", "s1", reach=reach))
    finally:
        zk_throwaway.resume()
    assert failed.value.code == "unreachable"
    assert failed.value.message.endswith("nothing done") and "\n" not in failed.value.message
    assert client.exists(node)


def test_a_chroot_or_zk_path_that_is_not_there_is_said_not_shown_as_no_locks(zk: Area) -> None:
    a = zk.zk.client()
    assert a.Lock(zk.path("real"), "held").acquire(timeout=10)
    code, out, err = run_cli("ls", "--zk", f"{zk.zk.connect}{zk.root}-typo", "--json")
    assert code == 1 and err.count("\n") == 1, err
    assert f"its chroot {zk.root}-typo does not exist" in err
    code, out, err = run_cli(
        "ls", "--zk", zk.zk.connect, "--zk-path", zk.path("nope"), "--zk-path", zk.root, "--json"
    )
    assert code == 1 and f"no znode {zk.path('nope')}" in err, err
    assert [lock["identifier"] for lock in json.loads(out)["locks"]] == ["held"]
    # Under a chroot that is there, paths are the chroot's own.
    code, out, err = run_cli("ls", "--zk", f"{zk.zk.connect}{zk.root}", "--json")
    assert code == 0, err
    (held,) = json.loads(out)["locks"]
    assert held["name"] == "/real" and held["id"].startswith(f"zk:{zk.zk.connect}{zk.root}:/real/")


def test_an_ensemble_nobody_listens_on_is_one_line_saying_why() -> None:
    from tests.zookeeper.conftest import free_port

    port = free_port()  # nothing listens there: refused
    code, out, err = run_cli("ls", "--zk", f"127.0.0.1:{port},nosuchhost.invalid:2181", "--json")
    assert code == 1 and err.count("\n") == 1, err
    assert f"127.0.0.1:{port}: Connection refused" in err and "nosuchhost.invalid:2181" in err
    (status,) = json.loads(out)["sources"]
    assert status["status"] == "disconnected" and "Traceback" not in err


def test_a_queue_past_the_bound_keeps_its_head_and_says_so(
    zk: Area, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One lock path with more contenders than a poll reads: the first in the
    queue (its holder) are the ones read, and the status says the rest were not."""
    from lockwatch.sources.zookeeper import server

    path = zk.path("crowded")
    clients = [zk.zk.client() for _ in range(6)]
    assert clients[0].Lock(path, "head").acquire(timeout=10)
    for n, client in enumerate(clients[1:], start=1):
        queued(client, client.Lock(path, f"waiter-{n}"), n + 1, path)
    monkeypatch.setattr(server, "MAX_NODES", 5)
    code, out, err = run_cli("ls", "--zk", zk.zk.connect, "--zk-path", zk.root, "--json")
    assert code == 1 and "over 5 znodes" in err, err
    locks = {lock["identifier"]: lock for lock in json.loads(out)["locks"]}
    assert locks["head"]["state"] == "active" and len(locks) < 6
    assert {lock["state"] for name, lock in locks.items() if name != "head"} == {"waiting"}
