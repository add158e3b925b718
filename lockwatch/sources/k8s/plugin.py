"""The Kubernetes source: Leases (coordination.k8s.io/v1) read through the
kubeconfig's context (or in-cluster config), judged as client-go's leader
election judges them.

Config table it owns:

    [k8s]
    context = "prod"                 # else the kubeconfig's current-context
    namespaces = ["kube-system"]     # else every namespace
    kubeconfig = "/etc/lockwatch/kubeconfig"  # else $KUBECONFIG, ~/.kube/config
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from lockwatch.sources.contract import Found, SourceError, Wanted
from lockwatch.sources.k8s import ids
from lockwatch.sources.k8s.declared import K8sDeclared
from lockwatch.sources.k8s.settings import K8sSettings, cluster_of, namespaces_of, read_settings
from lockwatch.sources.selection import StoreSelection
from lockwatch.sources.servers import DEFAULT_REFRESH, ServerPlugin, found_in, polled_once, refresh

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.model.changes import Entry
    from lockwatch.sources.k8s.kubeconfig import Cluster
    from lockwatch.sources.k8s.poller import K8sPoller


class K8sSource(ServerPlugin, K8sDeclared):
    @property
    def record_types(self) -> tuple[type, ...]:
        from lockwatch.sources.k8s.facts import CandidateFacts, LeaseFacts

        return (LeaseFacts, CandidateFacts)

    def read_config(self, tables: Mapping[str, Any], where: str) -> K8sSettings:
        return read_settings(tables, where)

    def select(self, wanted: Wanted) -> SelectedK8s | None:
        if not self.may_run(wanted):
            return None
        return SelectedK8s(cluster_of(wanted), namespaces_of(wanted), refresh(wanted))

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return find_k8s(target, wanted, host)


def settled(old: Entry, new: Entry) -> bool:
    """A Lease seen again that differs only by the poll's instant and the API
    server's clock: nothing to redraw."""
    from lockwatch.sources.k8s.facts import CandidateFacts, LeaseFacts

    of, nf = old.lock.facts, new.lock.facts
    ov, nv = old.verdict, new.verdict
    # Its age grows at every poll: what it says and when it next changes are what count.
    if (ov.state, ov.reasons, ov.next_change_at) != (nv.state, nv.reasons, nv.next_change_at):
        return False
    if isinstance(of, LeaseFacts) and isinstance(nf, LeaseFacts):
        steady = replace(nf, polled_at=of.polled_at, server_time=of.server_time)
        return replace(new.lock, facts=steady) == old.lock
    if isinstance(of, CandidateFacts) and isinstance(nf, CandidateFacts):
        return replace(new.lock, facts=replace(nf, polled_at=of.polled_at)) == old.lock
    return False


@dataclass(frozen=True)
class SelectedK8s(StoreSelection):
    kind: ClassVar[str] = "k8s"
    cluster: Cluster
    namespaces: tuple[str, ...]
    refresh: float = DEFAULT_REFRESH

    def pollers(self, clock: Clock) -> list[K8sPoller]:
        from lockwatch.sources.k8s.poller import K8sPoller
        from lockwatch.sources.k8s.server import LeaseServer

        return [K8sPoller(LeaseServer(self.cluster, self.namespaces, clock=clock))]

    def settler(self) -> Callable[[Entry, Entry], bool]:
        return settled


def find_k8s(target: str, wanted: Wanted, host: str) -> Found | str:
    """The Lease `target` names, read and judged now; or why there is none."""
    from lockwatch.clock import SystemClock
    from lockwatch.sources.k8s.poller import K8sPoller
    from lockwatch.sources.k8s.server import LeaseServer

    parsed = ids.parse_k8s(target)
    if parsed is None:
        raise SourceError(f"{target!r} is not a k8s lock id as `lockwatch ls --json` prints one")
    cluster = cluster_of(wanted)
    if cluster.name != parsed.server:
        raise SourceError(
            f"the kubeconfig context {cluster.context!r} is {cluster.name}, not {parsed.server}:"
            " name the right one with --k8s-context"
        )
    poller = K8sPoller(LeaseServer(cluster, (parsed.namespace,), clock=SystemClock()))
    found = found_in(polled_once(poller, f"k8s {parsed.server}"), target, host)
    return found or f"no {parsed.kind} {parsed.namespace}/{parsed.name} on {parsed.server} now"


SOURCE = K8sSource()
