"""What every run asks of the Kubernetes source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from lockwatch.sources.declaring import ServerDeclared, TargetOption
from lockwatch.sources.k8s import ids

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator


# The option naming its servers, in its listing and the action commands.
SERVERS = TargetOption("--k8s-context", "k8s_context", None, "NAME", multiple=False)


class K8sDeclared(ServerDeclared):
    name = "k8s"
    label = "k8s"
    id_prefix = ids.K8S
    summary = "Kubernetes Leases (leader election): holders, renewals, candidates"
    config_tables: tuple[str, ...] = ("k8s",)
    messages = "lockwatch.sources.k8s.messages"
    title = "Kubernetes"
    status_word = "k8s "
    sees_waits = True
    # LeaseCandidates wait on a Lease's holder: lockwatch_k8s_blocked_sessions {server}
    # and its kin count them (and `why` looks Leases up on the cluster).
    wait_metrics: str | None = "k8s"
    # A Lease nobody renewed for leaseDurationSeconds: client-go's candidates take it
    # from a holder they count as gone.
    holder_gone = frozenset({"k8s_past_due", "k8s_past_due_by_clock"})
    # Clusters come from the flags or the [k8s] table only: a kubeconfig on the
    # machine is no request to read it.
    asking = ("k8s", "k8s_namespaces")
    target_option = SERVERS
    target_help = (
        "The kubeconfig context a k8s: TARGET's API server is reached through"
        " (default: the current context)."
    )

    def options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--k8s",
                "k8s",
                is_flag=True,
                default=False,
                help="Kubernetes Leases of the kubeconfig's current context ($KUBECONFIG,"
                " else ~/.kube/config; inside a pod with neither, its service account).",
            ),
            SERVERS.option("The kubeconfig context to read Leases through (implies --k8s)."),
            click.option(
                "--k8s-namespace",
                "k8s_namespaces",
                multiple=True,
                metavar="NS",
                help="Read Leases in this namespace only (repeatable; implies --k8s; default:"
                " all namespaces, which needs list on leases at cluster scope).",
            ),
        ]


DECLARED = K8sDeclared()
