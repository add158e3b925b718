"""What every run asks of the ZooKeeper source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from lockwatch.sources.declaring import ServerDeclared, TargetOption
from lockwatch.sources.zookeeper import ids

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator


# The option naming its servers, in its listing and the action commands.
SERVERS = TargetOption("--zk", "zk_servers", None, "HOST:PORT[,...][/CHROOT]")


class ZooKeeperDeclared(ServerDeclared):
    name = "zookeeper"
    label = "zk"
    id_prefix = ids.ZK
    summary = (
        "ZooKeeper lock recipes (kazoo and Curator locks, read/write locks, semaphores,"
        " elections): holders, queues, sessions"
    )
    config_tables: tuple[str, ...] = ("zookeeper",)
    title = "ZooKeeper"
    status_word = "zk "
    # Contenders wait on each other in order: blocking trees and the Contention view.
    sees_waits = True
    # lockwatch_zk_blocked_sessions and its kin, per ensemble.
    wait_metrics: str | None = "zk"
    # A holder whose session has no client: ZooKeeper deletes its node when the
    # session expires, and the next contender takes the lock from the dead.
    holder_gone = frozenset({"session_gone"})
    target_option = SERVERS
    target_help = "The ZooKeeper ensemble a zk: TARGET lives on, when not the one its id names."

    def options(self) -> Sequence[Decorator]:
        return [
            SERVERS.option(
                "A ZooKeeper ensemble (kazoo's connect string) to read lock recipes from"
                " (repeatable). List every server of the ensemble: a session's client is"
                " looked up on each (the cons four-letter word)."
            ),
            click.option(
                "--zk-path",
                "zk_paths",
                multiple=True,
                metavar="PATH",
                help="Read recipes under this znode only (repeatable; default: the whole tree"
                " under the chroot, bounded).",
            ),
        ]


DECLARED = ZooKeeperDeclared()
