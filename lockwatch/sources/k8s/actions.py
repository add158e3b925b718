"""Breaking a Kubernetes Lease: clear its holderIdentity, compare-and-swap on
the resourceVersion the operator saw.

The break is one JSON merge patch, `{"metadata": {"resourceVersion": seen},
"spec": {"holderIdentity": null}}`: the API server applies a patch that names a
resourceVersion only to that very version of the object and answers 409
Conflict otherwise (a renewal, another holder, anything since), so nothing is
done to a Lease that is not the one the operator saw. With no holder, client-go's
next candidate to try (`tryAcquireOrRenew`) takes it at once, without waiting
out leaseDurationSeconds; the old holder, if it still runs, sees a record it did
not write at its next renewal and stops leading (its OnStoppedLeading), unless
it is the first to try and takes the free Lease again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockwatch.model.action import ActionFailed, ActionRefused, Done, Kind, Plan, refused
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import ActionsBase, SourceError, Wanted
from lockwatch.sources.k8s.facts import CandidateFacts, LeaseFacts

if TYPE_CHECKING:
    from lockwatch.model.action import Asked, Doing
    from lockwatch.sources.k8s.kubeconfig import Cluster

# The name the provider's reach goes by in `Doing.reach`.
REACH = "k8s_cluster"


@dataclass(frozen=True)
class Reach:
    """The cluster the run names (its kubeconfig context), by its server's name,
    or why there is none (a kubeconfig that gives no usable cluster)."""

    cluster: Cluster | None
    why: str = ""

    def __call__(self, server: str) -> Cluster | None:
        return self.cluster if self.cluster is not None and self.cluster.name == server else None


def plan_break(kind: Kind, lock: Lock, verdict: Verdict) -> Plan:
    facts = lock.facts
    if isinstance(facts, CandidateFacts):
        why = f"LeaseCandidate {facts.name} waits for Lease {facts.key}; it holds nothing"
        return refused(kind, lock, verdict, "not_held", why)
    assert isinstance(facts, LeaseFacts)
    if kind is not Kind.BREAK:
        why = f"a Lease can only be broken (its holderIdentity cleared), not {kind.value}"
        return refused(kind, lock, verdict, "unsupported", why)
    if not facts.holder:
        return refused(kind, lock, verdict, "not_held", f"nobody holds Lease {facts.key}")
    effect = (
        f"clear holderIdentity of Lease {facts.key} on {facts.server}, only if its"
        f" resourceVersion is still {facts.resource_version} (else the API server answers"
        " 409 Conflict and nothing is done); the next candidate to try takes it at once"
    )
    if facts.candidates:
        effect += f" (waiting: {', '.join(facts.candidates)})"
    effect += (
        f"; {facts.holder}, if it still runs, sees at its next renewal a record it did not"
        " write and stops leading (client-go's OnStoppedLeading: most controllers exit),"
        " unless it is first to take the free Lease again"
    )
    return Plan(
        kind, lock, verdict, "lock_broken", effect, needs_name=verdict.state is not State.STALE
    )


def execute(plan: Plan, doing: Doing) -> tuple[dict[str, Any], str]:
    import httpx

    from lockwatch.sources.k8s.api import LEASES, Api, ApiError, Forbidden
    from lockwatch.sources.k8s.kubeconfig import KubeconfigError

    facts = plan.lock.facts
    assert isinstance(facts, LeaseFacts)
    if doing.expect_sha256 is not None and doing.expect_sha256 != plan.lock.sha256:
        raise ActionRefused(
            "changed", f"Lease {facts.key} is not the one you saw (sha256 differs); nothing done"
        )
    reach = doing.reach.get(REACH)
    cluster = reach(facts.server) if isinstance(reach, Reach) else None
    if cluster is None:
        why = f" ({reach.why})" if isinstance(reach, Reach) and reach.why else ""
        raise ActionRefused(
            "no_dsn", f"no kubeconfig context for {facts.server}{why}: name it with --k8s-context"
        )
    patch = {
        "metadata": {"resourceVersion": facts.resource_version},
        "spec": {"holderIdentity": None},
    }
    api = Api(cluster)
    try:
        status, answer = api.merge_patch(
            "coordination.k8s.io/v1", "leases", facts.namespace, facts.name, patch, LEASES
        )
    except Forbidden as exc:
        raise ActionFailed("denied", f"{exc} ({exc.missing} is needed); nothing done") from None
    except (ApiError, KubeconfigError, httpx.HTTPError, OSError) as exc:
        raise ActionFailed("unreachable", f"k8s {facts.server}: {exc}; nothing done") from None
    finally:
        api.close()
    if status == 404:
        raise ActionRefused("gone", f"Lease {facts.key} is gone; nothing done")
    if status == 409:
        raise ActionRefused(
            "changed",
            f"Lease {facts.key} changed since you saw it (resourceVersion"
            f" {facts.resource_version} is no longer its version: renewed, or taken):"
            " nothing done",
        )
    version = str((answer.get("metadata") or {}).get("resourceVersion") or "")
    details = {
        "namespace": facts.namespace,
        "lease": facts.name,
        "previous_holder": facts.holder,
        "resource_version_seen": facts.resource_version,
        "resource_version_now": version,
        "renew_time_seen": facts.renew_time.isoformat() if facts.renew_time else None,
        "lease_transitions": facts.transitions,
    }
    message = (
        f"cleared holderIdentity {facts.holder} of Lease {facts.key} on {facts.server}"
        f" (resourceVersion {facts.resource_version} -> {version})"
    )
    return details, message


class K8sActions(ActionsBase):
    name = "k8s"
    kinds = frozenset({Kind.BREAK})

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        return plan_break(kind, lock, verdict)

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        from lockwatch.sources.k8s.settings import cluster_of

        try:
            return {REACH: Reach(cluster_of(wanted))}
        except SourceError as exc:
            return {REACH: Reach(None, str(exc))}

    def run(self, plan: Plan, doing: Doing) -> Done:
        details, message = execute(plan, doing)
        return Done(details, message)

    def target(self, lock: Lock) -> dict[str, Any]:
        facts = lock.facts
        if isinstance(facts, LeaseFacts):
            return {
                "server": facts.server,
                "namespace": facts.namespace,
                "lease": facts.name,
                "resource_version": facts.resource_version,
            }
        if isinstance(facts, CandidateFacts):
            return {"server": facts.server, "namespace": facts.namespace, "candidate": facts.name}
        return {}

    def where(self, lock: Lock) -> str | None:
        facts = lock.facts
        return facts.where(lock) if isinstance(facts, LeaseFacts | CandidateFacts) else None


ACTIONS = K8sActions()
