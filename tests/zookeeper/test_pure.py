"""The ZooKeeper source's pure parts: ids, connect strings, `cons` lines, the
recipes' ordering rules on names as the libraries write them, `why`'s patterns."""

from __future__ import annotations

import pytest

from lockwatch.model.clues import ClueKind
from lockwatch.sources.contract import SourceError
from lockwatch.sources.zookeeper import ids
from lockwatch.sources.zookeeper.endpoint import parse
from lockwatch.sources.zookeeper.fourletter import parse_cons
from lockwatch.sources.zookeeper.messages import clues
from lockwatch.sources.zookeeper.recipes import Node, contenders

KAZOO = "0f" * 16  # a uuid4().hex


@pytest.mark.parametrize(
    ("server", "path"),
    [
        ("zk1:2181", "/locks/a/x__lock__0000000001"),
        ("zk1:2181,zk2:2181,zk3:2181/app/chroot", "/l"),
        ("[::1]:2181", "/a:b/c"),
    ],
)
def test_ids_round_trip(server: str, path: str) -> None:
    assert ids.parse_zk(ids.zk_id(server, path)) == (server, path)


def test_connect_strings() -> None:
    endpoint = parse("zk1,zk2:2182/app/")
    assert endpoint.connect == "zk1:2181,zk2:2182/app"
    assert endpoint.hosts == (("zk1", 2181), ("zk2", 2182))
    for bad, said in (
        ("zk://zk1:2181", "no scheme"),
        ("user:pw@zk1:2181", "no credentials"),
        ("zk1:notaport", "not HOST:PORT"),
        ("/only-chroot", "no HOST:PORT"),
    ):
        with pytest.raises(SourceError, match=said):
            parse(bad)


def test_cons_lines_as_zookeeper_3_8_prints_them() -> None:
    text = (
        " /127.0.0.1:41312[1](queued=0,recved=7,sent=7,sid=0x1000005edb20000,lop=PING,"
        "est=1765119376223,to=10000,lcxid=0x5,lzxid=0x9,lresp=12,llat=0,minlat=0,avglat=0,"
        "maxlat=1)\n"
        " /127.0.0.1:41320[0](queued=0,recved=1,sent=0)\n"
    )
    assert parse_cons(text) == {0x1000005EDB20000: "127.0.0.1:41312"}


def _node(name: str, czxid: int, owner: int = 7) -> Node:
    return Node(name, czxid, 0, 0, owner)


def test_kazoo_compares_sequences_as_its_regex_finds_them_and_readers_share() -> None:
    nodes = [
        _node(f"{KAZOO}__lock__0000000002", 3),
        _node(f"{'a' * 32}__rlock__0000000000", 1),
        _node(f"{'b' * 32}__rlock__0000000001", 2),
        _node(f"{'c' * 32}__rlock__0000000003", 4),
    ]
    found = {c.node.czxid: c for c in contenders(nodes)}
    assert [found[n].holds for n in (1, 2, 3, 4)] == [True, True, False, False]
    assert found[3].mode == "write" and found[3].blocked_by == (nodes[1].name, nodes[2].name)
    # A reader after a writer waits for the writer (kazoo's ReadLock counts __lock__ only).
    assert found[4].blocked_by == (nodes[0].name,)


def test_curator_sorts_every_child_by_what_follows_its_lock_name() -> None:
    a = _node("_c_11111111-2222-3333-4444-555555555555-lock-0000000009", 1)
    b = _node("_c_99999999-2222-3333-4444-555555555555-lock-0000000004", 2)
    (first, second) = contenders([a, b])
    assert first.node is b and first.holds  # the sequence, not the UUID, orders them
    assert second.node is a and second.blocked_by == (b.name,)


def test_why_reads_kazoos_and_curators_messages() -> None:
    (kazoo,) = clues("kazoo.exceptions.LockTimeout: Failed to acquire lock on /a/b after 5 seconds")
    assert (kazoo.kind, kazoo.value, kazoo.tool) == (ClueKind.NAME, "/a/b", "kazoo")
    assert dict(kazoo.options) == {"zk_paths": ("/a/b",)}
    (sem,) = clues("Failed to acquire semaphore on /pool after 1.5 seconds")
    assert sem.value == "/pool"
    (curator,) = clues(
        "java.lang.IllegalMonitorStateException: You do not own the lock: /locks/jobs"
    )
    assert (curator.value, curator.tool) == ("/locks/jobs", "Curator")
    (hint,) = clues("IllegalStateException: client-3 could not acquire the lock")
    assert hint.kind is ClueKind.HINT
    assert clues("nothing about locks here") == []


def test_why_reads_a_kazoo_semaphore_with_its_queue() -> None:
    for text in (
        "LockTimeout: Failed to acquire lock on /pool-__lock__ after 0.29 seconds",
        "LockTimeout: Failed to acquire semaphore on /pool after 2 seconds",
    ):
        (clue,) = clues(text)
        assert clue.value == "/pool"
        assert dict(clue.options) == {"zk_paths": ("/pool", "/pool-__lock__")}


def test_why_without_an_ensemble_says_which_option_names_one() -> None:
    from tests.conftest import run_cli

    code, _, err = run_cli("why", "LockTimeout: Failed to acquire lock on /a after 5 seconds")
    assert code == 1
    assert "zookeeper: no server to ask (name one with --zk HOST:PORT[,...][/CHROOT])" in err
