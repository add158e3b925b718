"""What every run asks of the Kubernetes source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from lockwatch.sources.declaring import Repeatable, ServerDeclared, TargetOption
from lockwatch.sources.k8s import ids

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator


class K8sDeclared(ServerDeclared):
    # Its label and config table are its name; it recognises its messages.py's.
    name = "k8s"
    id_prefix = ids.K8S
    summary = "Kubernetes Leases (leader election): holders, renewals, candidates"
    title = "Kubernetes"
    status_word = "k8s "
    # LeaseCandidates wait on a Lease's holder: lockwatch_k8s_blocked_sessions {server}
    # and its kin count them (and `why` looks Leases up on the cluster).
    wait_metrics: str | None = "k8s"
    # A Lease lockwatch watched unrenewed for leaseDurationSeconds: client-go's
    # candidates take it from a holder they count as gone (a clock comparison alone,
    # k8s_past_due_by_clock, says no such thing).
    holder_gone = frozenset({"k8s_past_due"})
    # Clusters come from the flags or the [k8s] table only: a kubeconfig on the
    # machine is no request to read it.
    asking = ("k8s", "k8s_namespaces")
    # The option naming its servers: its listing's and the action commands'.
    target_option = TargetOption("--k8s-context", "k8s_context", None, "NAME", multiple=False)
    servers_help = "The kubeconfig context to read Leases through (implies --k8s)."
    target_help = (
        "The kubeconfig context a k8s: TARGET's API server is reached through"
        " (default: the current context)."
    )
    repeatable = (
        Repeatable(
            "--k8s-namespace",
            "k8s_namespaces",
            "NS",
            "Read Leases in this namespace only (repeatable; implies --k8s; default:"
            " all namespaces, which needs list on leases at cluster scope).",
        ),
    )

    def options(self) -> Sequence[Decorator]:
        # --k8s first: its context and namespaces narrow it.
        everywhere = click.option(
            "--k8s",
            "k8s",
            is_flag=True,
            default=False,
            help="Kubernetes Leases of the kubeconfig's current context ($KUBECONFIG,"
            " else ~/.kube/config; inside a pod with neither, its service account).",
        )
        return [everywhere, *super().options()]


DECLARED = K8sDeclared()
