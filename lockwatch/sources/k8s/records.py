"""Leases and LeaseCandidates as lock records: one lock per Lease (held, or
free when its holderIdentity is empty), one waiting lock per LeaseCandidate."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.k8s import ids
from lockwatch.sources.k8s.api import parse_time
from lockwatch.sources.k8s.facts import CandidateFacts, LeaseFacts
from lockwatch.sources.k8s.rules import (
    POD_GONE,
    POD_NOT_A_POD,
    POD_NOT_RUNNING,
    POD_RUNNING,
    POD_UNKNOWN,
)
from lockwatch.sources.k8s.server import LeaseSnapshot, PodsSeen, lease_key, record_of

LEASE_FORMAT = "k8s-lease"
CANDIDATE_FORMAT = "k8s-lease-candidate"
FORMATS = (LEASE_FORMAT, CANDIDATE_FORMAT)
NODE_LEASES = "kube-node-lease"


def digest(namespace: str, name: str, resource_version: str, record: tuple[Any, ...]) -> str:
    """What an action compares: the Lease, its resourceVersion and its record."""
    seen = orjson.dumps([namespace, name, resource_version, list(record)])
    return hashlib.sha256(seen).hexdigest()


def pod_names(holder: str) -> tuple[str, ...]:
    """The pod names a holderIdentity may stand for: itself (most operators use
    the pod name), and the hostname of `<hostname>_<uuid>` (client-go's
    components: a pod's hostname is its name)."""
    names = [holder]
    head, sep, _ = holder.partition("_")
    if sep and head:
        names.append(head)
    return tuple(dict.fromkeys(names))


def holder_pod(holder: str, namespace: str, seen: PodsSeen | None) -> tuple[str, str]:
    """(what lockwatch knows of the holder's pod, in words)."""
    if not holder or namespace == NODE_LEASES:
        return POD_NOT_A_POD, ""
    if seen is None:
        return POD_UNKNOWN, "pods not read"
    if seen.pods is None:
        return POD_UNKNOWN, seen.why
    names = pod_names(holder)
    for name in names:
        if name in seen.pods:
            phase, deleting = seen.pods[name]
            if deleting:
                return POD_NOT_RUNNING, f"pod {name} is being deleted"
            if phase in ("Succeeded", "Failed"):
                return POD_NOT_RUNNING, f"pod {name} is {phase}"
            return POD_RUNNING, f"pod {name} ({phase or 'no phase'})"
    # A static pod is named <component>-<node> (kube-controller-manager-node1),
    # its hostname the node's: a holder `node1_<uuid>` is there.
    host = names[-1]
    for name, (phase, deleting) in seen.pods.items():
        if name.endswith(f"-{host}") and not deleting and phase not in ("Succeeded", "Failed"):
            return POD_RUNNING, f"pod {name} on {host} ({phase or 'no phase'})"
    return POD_GONE, f"no pod {' or '.join(names)} in {namespace}"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _record(
    snapshot: LeaseSnapshot,
    kind: tuple[str, str],
    namespace: str,
    name: str,
    lease: str,
    holder: str,
    **more: Any,
) -> Lock:
    """The record of a Lease or a LeaseCandidate (`kind`: its id's kind and its
    format) named `name`: shown as the Lease it holds or asks for, by `holder`."""
    kind_id, fmt = kind
    return Lock(
        id=ids.k8s_id(snapshot.server, kind_id, namespace, name),
        source=ids.K8S,
        format=fmt,
        name=f"{namespace}/{lease}",
        path=None,
        holder=Holder(actor=holder or None, session=holder or None),
        **more,
    )


def _lease(snapshot: LeaseSnapshot, lease: dict[str, Any], waiting: tuple[str, ...]) -> Lock:
    spec, meta = lease.get("spec") or {}, lease.get("metadata") or {}
    namespace, name = lease_key(lease)
    holder = str(spec.get("holderIdentity") or "")
    observed = snapshot.observed[(namespace, name)]
    pod, detail = holder_pod(holder, namespace, snapshot.pods.get(namespace))
    version = str(meta.get("resourceVersion") or "")
    facts = LeaseFacts(
        snapshot.server,
        namespace,
        name,
        holder,
        _int(spec.get("leaseDurationSeconds")),
        parse_time(spec.get("acquireTime")),
        parse_time(spec.get("renewTime")),
        _int(spec.get("leaseTransitions")),
        version,
        snapshot.polled_at,
        observed.at,
        observed.first,
        server_time=snapshot.server_time,
        pod=pod,
        pod_detail=detail,
        recent_changes=snapshot.changes.get((namespace, name), 0),
        candidates=waiting,
        strategy=spec.get("strategy") if isinstance(spec.get("strategy"), str) else None,
        preferred_holder=(
            spec.get("preferredHolder") if isinstance(spec.get("preferredHolder"), str) else None
        ),
    )
    # A free Lease is nobody's claim: its acquireTime and renewTime are the last
    # holder's (kept in its facts), no age or heartbeat of a lock held now.
    held = bool(holder)
    return _record(
        snapshot,
        (ids.LEASE, LEASE_FORMAT),
        namespace,
        name,
        name,
        holder,
        acquired_at=facts.acquire_time if held else None,
        heartbeat_at=facts.renew_time if held else None,
        ttl_seconds=float(facts.duration) if held and facts.duration else None,
        content={"metadata": {"resourceVersion": version}, "spec": spec},
        sha256=digest(namespace, name, version, record_of(lease)),
        facts=facts,
    )


def _candidate(
    snapshot: LeaseSnapshot, item: dict[str, Any], holders: dict[tuple[str, str], str]
) -> Lock | None:
    spec, meta = item.get("spec") or {}, item.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    lease = spec.get("leaseName")
    if not isinstance(lease, str) or not lease or not name:
        return None
    holder = holders.get((namespace, lease), "")
    facts = CandidateFacts(
        snapshot.server,
        namespace,
        name,
        lease,
        holder,
        parse_time(spec.get("pingTime")),
        parse_time(spec.get("renewTime")),
        str(spec.get("binaryVersion") or ""),
        str(spec.get("emulationVersion") or ""),
        str(spec.get("strategy") or ""),
        snapshot.polled_at,
    )
    return _record(
        snapshot,
        (ids.CANDIDATE, CANDIDATE_FORMAT),
        namespace,
        name,
        lease,
        name,
        heartbeat_at=facts.renew_time,
        content={"spec": spec},
        facts=facts,
    )


def to_locks(snapshot: LeaseSnapshot) -> list[Lock]:
    holders = {
        lease_key(lease): str((lease.get("spec") or {}).get("holderIdentity") or "")
        for lease in snapshot.leases
    }
    waiting: dict[tuple[str, str], list[str]] = {}
    locks: list[Lock] = []
    for item in snapshot.candidates:
        lock = _candidate(snapshot, item, holders)
        if lock is None:
            continue
        facts = lock.facts
        assert isinstance(facts, CandidateFacts)
        if facts.name == facts.holder:
            continue  # the holder's own candidacy: it holds, it does not wait
        waiting.setdefault((facts.namespace, facts.lease), []).append(facts.name)
        locks.append(lock)
    for lease in snapshot.leases:
        if lease_key(lease) in snapshot.observed:
            locks.append(_lease(snapshot, lease, tuple(waiting.get(lease_key(lease), ()))))
    return locks
