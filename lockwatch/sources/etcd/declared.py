"""What every run asks of the etcd source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from lockwatch.sources.declaring import ServerDeclared, TargetOption
from lockwatch.sources.etcd import ids
from lockwatch.sources.secrets import InArguments, url_passwords

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator

# An --etcd URL with credentials is refused (endpoint.py); until then it is in `ps`.
IN_ARGUMENTS = InArguments(
    "--etcd",
    url_passwords,
    "a URL without credentials (a read-only proxy, or client certificates in front of the"
    " gateway): etcd user authentication is not supported",
)


# The option naming its servers, in its listing and the action commands.
SERVERS = TargetOption("--etcd", "etcd_urls", IN_ARGUMENTS, "URL")


class EtcdDeclared(ServerDeclared):
    name = "etcd"
    label = "etcd"
    id_prefix = ids.ETCD
    summary = "etcd v3 locks (etcdctl lock, concurrency mutexes): holders, waiters, leases"
    config_tables: tuple[str, ...] = ("etcd",)
    title = "etcd"
    target_option = SERVERS
    target_help = "The etcd server an etcd: TARGET lives on, when not http://<its host:port>."

    def options(self) -> Sequence[Decorator]:
        return [
            SERVERS.option(
                "An etcd v3 server (http:// or https://, its JSON gateway) to read locks"
                " from (repeatable)."
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


DECLARED = EtcdDeclared()
