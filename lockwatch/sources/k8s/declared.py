"""What every run asks of the Kubernetes source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from lockwatch.sources.k8s import ids

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted


class K8sDeclared:
    name = "k8s"
    label = "k8s"
    id_prefix = ids.K8S
    summary = "Kubernetes Leases (leader election): holders, renewals, candidates"
    config_tables: tuple[str, ...] = ("k8s",)
    title = "Kubernetes"
    status_word = "k8s "
    sees_waits = True
    # LeaseCandidates wait on a Lease's holder: lockwatch_k8s_blocked_sessions {server}
    # and its kin count them (and `why` looks Leases up on the cluster).
    wait_metrics: str | None = "k8s"
    # A Lease nobody renewed for leaseDurationSeconds: client-go's candidates take it
    # from a holder they count as gone.
    holder_gone = frozenset({"k8s_past_due", "k8s_past_due_by_clock"})

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
            click.option(
                "--k8s-context",
                "k8s_context",
                metavar="NAME",
                help="The kubeconfig context to read Leases through (implies --k8s).",
            ),
            click.option(
                "--k8s-namespace",
                "k8s_namespaces",
                multiple=True,
                metavar="NS",
                help="Read Leases in this namespace only (repeatable; implies --k8s; default:"
                " all namespaces, which needs list on leases at cluster scope).",
            ),
        ]

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        # Here, not in the plugin: `--help` of the action commands loads no plugin.
        if kind is not None:
            return ()
        return [
            click.option(
                "--k8s-context",
                "k8s_context",
                metavar="NAME",
                help="The kubeconfig context a k8s: TARGET's API server is reached through"
                " (default: the current context).",
            )
        ]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return bool(values.get("k8s") or values.get("k8s_context") or values.get("k8s_namespaces"))

    def clues(self, text: str) -> Sequence[Clue]:
        from lockwatch.sources.k8s.messages import clues

        return clues(text)

    def may_run(self, wanted: Wanted) -> bool:
        # Clusters come from the flags or the [k8s] table only: a kubeconfig on the
        # machine is no request to read it.
        return self.asked(wanted.values) or wanted.settings(self.name) is not None


DECLARED = K8sDeclared()
