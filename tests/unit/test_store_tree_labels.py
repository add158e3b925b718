"""How the incident report's blocking trees name Redis and etcd sessions: a
waiting client, a holder's token, an etcd lease, never a PostgreSQL prepared
transaction (which only pg waiters name)."""

from __future__ import annotations

from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, judge
from lockwatch.model.incident import capture, to_markdown
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.sources.etcd.gateway import KeyValue
from lockwatch.sources.etcd.records import to_locks as etcd_locks
from lockwatch.sources.etcd.server import EtcdSnapshot
from lockwatch.sources.redis.records import to_locks as redis_locks
from lockwatch.sources.redis.server import BlockedClient, RedisKey, RedisSnapshot
from tests.conftest import LOCAL_HOST, NOW
from tests.facts_of import store_of

REDIS_SERVER = "10.0.0.5:6379/0"
ETCD_SERVER = "etcd1:2379"


def redis_queue() -> list[Lock]:
    """A lock held with token `abc123` and client 7 blocked in its BLPOP."""
    signal = len("lock-signal:queue")
    waiter = BlockedClient(7, "10.0.0.9:5000", "", 0, "blpop", 5 + signal + 2, 4)
    snapshot = RedisSnapshot(
        REDIS_SERVER, 0, NOW, [RedisKey("lock:queue", "abc123", 30000)], [waiter]
    )
    return redis_locks(snapshot)


def etcd_mutex() -> list[Lock]:
    """A mutex held by lease 1f, lease 2a queued behind it, and a plain key."""
    keys = [
        KeyValue("/locks/deploy/1f", "", 10, 10, 1, 0x1F),
        KeyValue("/locks/deploy/2a", "", 11, 11, 1, 0x2A),
        KeyValue("/locks/plain", "someone", 5, 5, 1, 0),
    ]
    return etcd_locks(EtcdSnapshot(ETCD_SERVER, NOW, 42, keys, {0x1F: (7, 10), 0x2A: (9, 10)}))


def test_store_locks_label_their_tree_nodes_by_kind() -> None:
    holder, waiter = redis_queue()
    assert store_of(holder).tree_node() == ("abc123", "token abc123")
    assert store_of(waiter).tree_node() == ("client:7", "client 7")
    labels = {store_of(lock).key: store_of(lock).tree_node() for lock in etcd_mutex()}
    assert labels == {
        "/locks/deploy/1f": ("1f", "lease 1f"),
        "/locks/deploy/2a": ("2a", "lease 2a"),
        "/locks/plain": ("someone", "value someone"),
    }


def test_incident_report_names_store_sessions_not_prepared_transactions() -> None:
    board = Board(LOCAL_HOST)
    for feed, locks in (("redis", redis_queue()), ("etcd", etcd_mutex())):
        upserts = tuple(judge(locks, StaticProcesses(), NOW, LOCAL_HOST))
        board.apply(ChangeSet(feed, NOW, full=True, upserts=upserts))
    report = to_markdown(capture(board, NOW, LOCAL_HOST))
    assert f"### `redis:{REDIS_SERVER}`" in report and f"### etcd:{ETCD_SERVER}" in report
    assert "- token abc123 blocks 1 directly, 1 in total" in report
    assert "  - client 7" in report
    assert "- lease 1f blocks 1 directly, 1 in total" in report
    assert "  - lease 2a" in report
    assert "prepared transaction" not in report
