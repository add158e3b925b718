"""What every run asks of the etcd source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from lockwatch.sources.etcd import ids
from lockwatch.sources.secrets import InArguments, secret_option, url_passwords

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted

# An --etcd URL with credentials is refused (endpoint.py); until then it is in `ps`.
IN_ARGUMENTS = InArguments(
    "--etcd",
    url_passwords,
    "a URL without credentials (a read-only proxy, or client certificates in front of the"
    " gateway): etcd user authentication is not supported",
)


class EtcdDeclared:
    name = "etcd"
    label = "etcd"
    id_prefix = ids.ETCD
    summary = "etcd v3 locks (etcdctl lock, concurrency mutexes): holders, waiters, leases"
    config_tables: tuple[str, ...] = ("etcd",)
    title = "etcd"
    status_word = ""
    sees_waits = False
    wait_metrics: str | None = None

    def options(self) -> Sequence[Decorator]:
        return [
            secret_option(
                "--etcd",
                "etcd_urls",
                carries=IN_ARGUMENTS,
                multiple=True,
                metavar="URL",
                help="An etcd v3 server (http:// or https://, its JSON gateway) to read locks"
                " from (repeatable).",
            ),
            click.option(
                "--etcd-prefix",
                "etcd_prefixes",
                multiple=True,
                metavar="PREFIX",
                help="A key prefix holding locks, beside /locks/ (repeatable). A prefix of"
                " keys, not a directory: /tooz/locks reads /tooz/locks<name> (and"
                " /tooz/locksmith); end it with / for a directory.",
            ),
        ]

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        if kind is not None:
            return ()
        return [
            secret_option(
                "--etcd",
                "etcd_urls",
                carries=IN_ARGUMENTS,
                multiple=True,
                metavar="URL",
                help="The etcd server an etcd: TARGET lives on, when not http://<its host:port>.",
            )
        ]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return bool(values.get("etcd_urls"))

    def clues(self, text: str) -> Sequence[Clue]:
        # Its ids (etcd:...) are the registry's to recognise.
        return ()

    def may_run(self, wanted: Wanted) -> bool:
        # Servers come from the flags or the [etcd] table only.
        return self.asked(wanted.values) or wanted.settings(self.name) is not None


DECLARED = EtcdDeclared()
