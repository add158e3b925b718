"""What every run asks of the etcd source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from lockwatch.sources.declaring import Repeatable, ServerDeclared, TargetOption
from lockwatch.sources.etcd import ids
from lockwatch.sources.secrets import InArguments, url_passwords

# An --etcd URL with credentials is refused (endpoint.py); until then it is in `ps`.
IN_ARGUMENTS = InArguments(
    "--etcd",
    url_passwords,
    "a URL without credentials (a read-only proxy, or client certificates in front of the"
    " gateway): etcd user authentication is not supported",
)


class EtcdDeclared(ServerDeclared):
    # Its label, title and config table are its name.
    name = "etcd"
    id_prefix = ids.ETCD
    summary = "etcd v3 locks (etcdctl lock, concurrency mutexes): holders, waiters, leases"
    # The option naming its servers: its listing's and the action commands'.
    target_option = TargetOption("--etcd", "etcd_urls", IN_ARGUMENTS, "URL")
    servers_help = (
        "An etcd v3 server (http:// or https://, its JSON gateway) to read locks from (repeatable)."
    )
    target_help = "The etcd server an etcd: TARGET lives on, when not http://<its host:port>."
    repeatable = (
        Repeatable(
            "--etcd-prefix",
            "etcd_prefixes",
            "PREFIX",
            "A key prefix holding locks, beside /locks/ (repeatable). A prefix of"
            " keys, not a directory: /tooz/locks reads /tooz/locks<name> (and"
            " /tooz/locksmith); end it with / for a directory.",
        ),
    )


DECLARED = EtcdDeclared()
