"""What every run asks of the ZooKeeper source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from lockwatch.sources.zookeeper import ids

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted


class ZooKeeperDeclared:
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

    def options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--zk",
                "zk_servers",
                multiple=True,
                metavar="HOST:PORT[,...][/CHROOT]",
                help="A ZooKeeper ensemble (kazoo's connect string) to read lock recipes from"
                " (repeatable). List every server of the ensemble: a session's client is"
                " looked up on each (the cons four-letter word).",
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

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        if kind is not None:
            return ()
        import click

        return [
            click.option(
                "--zk",
                "zk_servers",
                multiple=True,
                metavar="HOST:PORT[,...][/CHROOT]",
                help="The ZooKeeper ensemble a zk: TARGET lives on, when not the one its id names.",
            )
        ]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return bool(values.get("zk_servers"))

    def clues(self, text: str) -> Sequence[Clue]:
        from lockwatch.sources.zookeeper.messages import clues

        return clues(text)

    def may_run(self, wanted: Wanted) -> bool:
        return self.asked(wanted.values) or wanted.settings(self.name) is not None


DECLARED = ZooKeeperDeclared()
