"""What every run asks of the ZooKeeper source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from lockwatch.sources.declaring import Repeatable, ServerDeclared, TargetOption
from lockwatch.sources.zookeeper import ids


class ZooKeeperDeclared(ServerDeclared):
    # Its config table is its name; it recognises its messages.py's.
    name = "zookeeper"
    label = "zk"
    id_prefix = ids.ZK
    summary = (
        "ZooKeeper lock recipes (kazoo and Curator locks, read/write locks, semaphores,"
        " elections): holders, queues, sessions"
    )
    title = "ZooKeeper"
    status_word = "zk "
    # Contenders wait on each other in order: blocking trees and the Contention view;
    # lockwatch_zk_blocked_sessions and its kin, per ensemble.
    wait_metrics: str | None = "zk"
    # ... labelled `zookeeper:<connect string>`, as its blocking trees and episodes are.
    wait_label_prefixed = True
    # A holder whose session has no client: ZooKeeper deletes its node when the
    # session expires, and the next contender takes the lock from the dead; a
    # kazoo lease past its end: the next identifier to ask takes it.
    holder_gone = frozenset({"session_gone", "lease_expired"})
    # The option naming its servers: its listing's and the action commands'.
    target_option = TargetOption("--zk", "zk_servers", None, "HOST:PORT[,...][/CHROOT]")
    servers_help = (
        "A ZooKeeper ensemble (kazoo's connect string) to read lock recipes from"
        " (repeatable). List every server of the ensemble: a session's client is"
        " looked up on each (the cons four-letter word)."
    )
    target_help = "The ZooKeeper ensemble a zk: TARGET lives on, when not the one its id names."
    repeatable = (
        Repeatable(
            "--zk-path",
            "zk_paths",
            "PATH",
            "Read recipes under this znode only (repeatable; default: the whole tree"
            " under the chroot, bounded).",
        ),
    )


DECLARED = ZooKeeperDeclared()
