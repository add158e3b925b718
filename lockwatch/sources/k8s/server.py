"""One Kubernetes API server, polled: its Leases, LeaseCandidates and the pods
that hold Leases, with what lockwatch observed of each Lease between polls.

A poll lists (never watches: a list is one bounded answer within the poll's
deadline, and the observation times below are what a watch would give, to a
poll's interval) Leases in every namespace, or in those named; LeaseCandidates
where the server serves them; and pods in the namespaces whose Leases have a
holder. It writes nothing.

What it keeps between polls is client-go's `observedRecord`/`observedTime` for
every Lease: the record as last seen and when this process first saw it so
(rules.py judges by it), and when each Lease last changed hands (flapping).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lockwatch.clock import Clock
from lockwatch.model.status import SourceStatus
from lockwatch.sources.backoff import ServerState, failed
from lockwatch.sources.contract import DEFAULT_DEADLINE
from lockwatch.sources.deadline import Deadline, DeadlineMissed, deadline_transport
from lockwatch.sources.k8s.api import (
    CANDIDATE_VERSIONS,
    CANDIDATES,
    LEASES,
    PODS,
    Api,
    ApiError,
    Forbidden,
    Listed,
)
from lockwatch.sources.k8s.kubeconfig import Cluster, KubeconfigError
from lockwatch.sources.k8s.rules import FLAP_WINDOW

# Leases lockwatch keeps observations of; one that disappears is forgotten.
MAX_LEASES = 10_000


@dataclass(frozen=True)
class PodsSeen:
    """A namespace's pods as read: name -> (phase, being deleted); or why not."""

    pods: dict[str, tuple[str, bool]] | None
    why: str = ""  # why they were not read ("list pods -n ns is not allowed"), when None


@dataclass(frozen=True)
class Observed:
    record: tuple[Any, ...]
    at: datetime  # when this process first saw the record so
    first: datetime  # when it first saw the Lease


@dataclass(frozen=True)
class LeaseSnapshot:
    server: str
    polled_at: datetime
    server_time: datetime | None
    leases: list[dict[str, Any]]
    candidates: list[dict[str, Any]]
    pods: dict[str, PodsSeen]
    observed: dict[tuple[str, str], Observed]
    changes: dict[tuple[str, str], int]  # holder changes seen within FLAP_WINDOW
    notes: tuple[str, ...] = ()  # what could not be read (a partial picture)


def record_of(lease: dict[str, Any]) -> tuple[Any, ...]:
    """The fields of a Lease's spec that client-go's record is made of: any change
    of them is a change client-go observes."""
    spec = lease.get("spec") or {}
    return tuple(
        repr(spec.get(key))
        for key in (
            "holderIdentity",
            "leaseDurationSeconds",
            "acquireTime",
            "renewTime",
            "leaseTransitions",
            "strategy",
            "preferredHolder",
        )
    )


def lease_key(lease: dict[str, Any]) -> tuple[str, str]:
    meta = lease.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


@dataclass
class Memory:
    """What the poller observed of each Lease across polls."""

    observed: dict[tuple[str, str], Observed] = field(default_factory=dict)
    holders: dict[tuple[str, str], str] = field(default_factory=dict)
    handovers: dict[tuple[str, str], deque[datetime]] = field(default_factory=dict)
    # leaseTransitions as seen: (when lockwatch first saw each count, the count), from
    # the one FLAP_WINDOW starts with.
    transitions: dict[tuple[str, str], deque[tuple[datetime, int]]] = field(default_factory=dict)

    def see(self, leases: list[dict[str, Any]], now: datetime) -> dict[tuple[str, str], int]:
        """Note each Lease's record; how often each changed hands within FLAP_WINDOW."""
        observed: dict[tuple[str, str], Observed] = {}
        changes: dict[tuple[str, str], int] = {}
        for lease in leases[:MAX_LEASES]:
            key, record = lease_key(lease), record_of(lease)
            last = self.observed.get(key)
            if last is None:
                observed[key] = Observed(record, now, now)
            elif last.record != record:
                observed[key] = Observed(record, now, last.first)
            else:
                observed[key] = last
            spec = lease.get("spec") or {}
            # Hand-overs between two polls are seen only in leaseTransitions' growth.
            changes[key] = max(self._handed(key, spec, now), self._grown(key, spec, now))
        for gone in set(self.holders) - set(observed):
            self.holders.pop(gone, None)
            self.handovers.pop(gone, None)
            self.transitions.pop(gone, None)
        self.observed = observed
        return changes

    def _handed(self, key: tuple[str, str], spec: dict[str, Any], now: datetime) -> int:
        """Holder changes seen from poll to poll within FLAP_WINDOW."""
        holder = str(spec.get("holderIdentity") or "")
        times = self.handovers.setdefault(key, deque(maxlen=64))
        if key in self.holders and self.holders[key] != holder and holder:
            times.append(now)
        self.holders[key] = holder
        while times and (now - times[0]).total_seconds() > FLAP_WINDOW:
            times.popleft()
        return len(times)

    def _grown(self, key: tuple[str, str], spec: dict[str, Any], now: datetime) -> int:
        """How much leaseTransitions grew within FLAP_WINDOW, as lockwatch saw it."""
        count = spec.get("leaseTransitions")
        seen = self.transitions.setdefault(key, deque(maxlen=64))
        if not isinstance(count, int) or isinstance(count, bool):
            seen.clear()
            return 0
        if seen and count < seen[-1][1]:
            seen.clear()  # counted down: the Lease was made anew
        if not seen or count != seen[-1][1]:
            seen.append((now, count))  # when each count was first seen
        # The first count kept is the one the window starts with.
        while len(seen) > 1 and (now - seen[1][0]).total_seconds() > FLAP_WINDOW:
            seen.popleft()
        return count - seen[0][1]


class LeaseServer(ServerState):
    def __init__(
        self,
        cluster: Cluster,
        namespaces: tuple[str, ...] = (),
        *,
        clock: Clock | None = None,
        timeout: float = 2.0,
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        super().__init__("k8s", cluster.name, clock, deadline)
        self.cluster = cluster
        self.namespaces = namespaces
        self._timeout = timeout
        self._deadline = Deadline()
        self._api: Api | None = None
        self._memory = Memory()
        self._candidates: str | None = ""  # the LeaseCandidate version served; None: none
        self.last_success: datetime | None = None

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def _connect(self) -> Api:
        if self._api is None:
            transport = deadline_transport(self._deadline, self.cluster.ssl_context())
            self._api = Api(self.cluster, self._timeout, transport=transport)
        return self._api

    def poll(self) -> LeaseSnapshot | None:
        import httpx

        try:
            api = self._connect()
            with self._deadline.running(self.deadline):
                snapshot = self._read(api)
        except (DeadlineMissed, ApiError, KubeconfigError, httpx.HTTPError, OSError) as exc:
            why = str(exc) or type(exc).__name__
            failed(self, "k8s", why, away=True, updated_at=self.last_success)
            return None
        self.failures = 0
        self.retry_in = 0.0
        self.last_success = snapshot.polled_at
        reason = "; ".join(snapshot.notes) or None
        # Notes are what it could not read: a partial picture, never "no locks".
        self.status = SourceStatus(
            "k8s",
            self.name,
            "connected",
            reason=reason,
            updated_at=snapshot.polled_at,
            partial=reason is not None,
        )
        return snapshot

    def _leases(self, api: Api) -> tuple[list[dict[str, Any]], datetime | None, list[str]]:
        notes: list[str] = []
        listed: list[Listed] = []
        for namespace in self.namespaces or (None,):
            try:
                found = api.list("coordination.k8s.io/v1", "leases", namespace, LEASES)
            except Forbidden as exc:
                if namespace is None:  # a namespaced Role may still allow some
                    raise ApiError(403, f"{exc}: name namespaces with --k8s-namespace") from None
                # The other namespaces are still read; this one is unknown, and said.
                notes.append(f"Leases in {namespace} unknown: {exc.missing} is not allowed")
                continue
            if found is None:
                raise ApiError(404, "this server serves no coordination.k8s.io/v1 Leases")
            listed.append(found)
            if found.cut:
                notes.append(f"only the first {len(found.items)} Leases read")
        if not listed:
            raise ApiError(403, "; ".join(notes))
        when = next((each.server_time for each in listed if each.server_time), None)
        return [item for each in listed for item in each.items], when, notes

    def _read_candidates(self, api: Api, notes: list[str]) -> list[dict[str, Any]]:
        if self._candidates is None:
            return []
        versions = (self._candidates,) if self._candidates else CANDIDATE_VERSIONS
        for version in versions:
            items: list[dict[str, Any]] = []
            try:
                for namespace in self.namespaces or (None,):
                    found = api.list(
                        f"coordination.k8s.io/{version}", "leasecandidates", namespace, CANDIDATES
                    )
                    if found is None:
                        break
                    items.extend(found.items)
                else:
                    self._candidates = version
                    return items
            except Forbidden as exc:
                notes.append(f"LeaseCandidates unknown: {exc.missing} is not allowed")
                return []
        self._candidates = None  # not served: asked no more
        return []

    def _pods(self, api: Api, namespaces: set[str]) -> dict[str, PodsSeen]:
        seen: dict[str, PodsSeen] = {}
        for namespace in sorted(namespaces):
            try:
                found = api.list("v1", "pods", namespace, PODS)
            except Forbidden as exc:
                seen[namespace] = PodsSeen(None, f"{exc.missing} is not allowed")
                continue
            except ApiError as exc:
                # Pods too many or too large to read: their holders' pods are unknown,
                # the Leases themselves still read.
                seen[namespace] = PodsSeen(None, f"pods not read ({exc})")
                continue
            if found is None:
                seen[namespace] = PodsSeen(None, "pods are not served")
                continue
            pods: dict[str, tuple[str, bool]] = {}
            for pod in found.items:
                meta = pod.get("metadata") or {}
                status = pod.get("status") or {}
                pods[str(meta.get("name") or "")] = (
                    str(status.get("phase") or ""),
                    bool(meta.get("deletionTimestamp")),
                )
            if found.cut:  # a pod not among those read may be the holder's
                seen[namespace] = PodsSeen(
                    None, f"more than {len(found.items)} pods in {namespace}"
                )
            else:
                seen[namespace] = PodsSeen(pods)
        return seen

    def _read(self, api: Api) -> LeaseSnapshot:
        leases, server_time, notes = self._leases(api)
        candidates = self._read_candidates(api, notes)
        held = {
            lease_key(lease)[0]
            for lease in leases
            if (lease.get("spec") or {}).get("holderIdentity")
        }
        held.discard("kube-node-lease")  # nodes' heartbeats: their holders are nodes
        pods = self._pods(api, held)
        polled_at = self.clock.now()
        changes = self._memory.see(leases, polled_at)
        return LeaseSnapshot(
            self.name,
            polled_at,
            server_time,
            leases,
            candidates,
            pods,
            dict(self._memory.observed),
            changes,
            tuple(notes),
        )
