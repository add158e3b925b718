"""A Kubernetes Lease (or LeaseCandidate) as lockwatch sees it: pure facts,
judged in rules.py as client-go's leader election judges them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.clues import ClueKind, Match, Sureness
from lockwatch.model.facts import Facts, Party, Section, Series
from lockwatch.model.jsonfields import json_fields
from lockwatch.sources.k8s.rules import (
    POD_GONE,
    POD_NOT_A_POD,
    POD_NOT_RUNNING,
    WARNINGS,
    candidate_rows,
    judge_candidate,
    judge_lease,
    lease_rows,
)

if TYPE_CHECKING:
    from lockwatch.model.clues import Clue
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup
    from lockwatch.model.verdict import Verdict


@dataclass(frozen=True, slots=True)
class ClusterObject(Facts):
    """What a Lease and a LeaseCandidate share: where they were read (the API
    server, their namespace) and their name; each judged by its kind's rule and
    recorded with its kind's fields after these."""

    server: str  # the API server, host:port
    namespace: str
    name: str

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        return self.judged(now)

    def judged(self, now: datetime) -> Verdict:
        raise NotImplementedError

    def extend_record(self, record: dict[str, Any]) -> None:
        record.update(server=self.server, namespace=self.namespace, **self.kind_record())

    def kind_record(self) -> dict[str, Any]:
        raise NotImplementedError

    def place(self, lock: Lock) -> str:
        return f"k8s {self.server}"

    def group(self) -> str:
        return f"k8s:{self.server}"

    def wait_metrics_server(self) -> str:
        return self.server


@dataclass(frozen=True, slots=True)
class LeaseFacts(ClusterObject):
    holder: str  # holderIdentity; "": nobody
    duration: int | None  # leaseDurationSeconds
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int | None  # leaseTransitions
    resource_version: str
    polled_at: datetime
    # When lockwatch first saw the record as it is now (its own clock), and when it
    # first saw this Lease at all: client-go's observedTime.
    observed_at: datetime
    first_seen_at: datetime
    server_time: datetime | None = None  # the API server's clock at the poll (Date)
    pod: str = POD_NOT_A_POD
    pod_detail: str = ""
    recent_changes: int = 0  # holder changes lockwatch saw within FLAP_WINDOW
    candidates: tuple[str, ...] = ()  # LeaseCandidates waiting for it
    strategy: str | None = None
    preferred_holder: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def watched_change(self) -> bool:
        """lockwatch saw the record change, so it times renewals by its own clock."""
        return self.observed_at > self.first_seen_at

    def judged(self, now: datetime) -> Verdict:
        return judge_lease(self, now)

    kind_record = json_fields(
        ("lease", "name"),
        ("holder_identity", lambda lease: lease.holder or None),
        ("lease_duration_seconds", "duration"),
        "acquire_time",
        "renew_time",
        ("lease_transitions", "transitions"),
        "resource_version",
        "observed_at",
        ("holder_pod", lambda lease: lease.pod or None),
        ("candidates", lambda lease: list(lease.candidates)),
    )

    def holder_text(self, lock: Lock) -> str:
        if not self.holder:
            return "nobody"
        pod = {POD_GONE: " (pod gone)", POD_NOT_RUNNING: " (pod not running)"}.get(self.pod, "")
        return f"{self.holder}{pod}"

    def where(self, lock: Lock) -> str:
        return f"k8s {self.server} lease {self.key}"

    def since(self, lock: Lock) -> datetime | None:
        return self.first_seen_at if self.acquire_time is None else None

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:
        return (Section("Kubernetes Lease", lease_rows(self, now)),)

    def warning_codes(self) -> frozenset[str]:
        return WARNINGS

    def matches_text(self, needle: str) -> bool:
        return needle in self.holder.lower() or needle in self.namespace.lower()

    def named_by(self, lock: Lock, clue: Clue) -> Match | None:
        if clue.kind is ClueKind.NAME and clue.said("is") == "holder":
            # "lock is held by X": X may hold other Leases too, so likely, not certain.
            if self.holder and clue.value == self.holder:
                return Match(Sureness.LIKELY, f"Lease {self.key}, held by {self.holder}")
            return None
        # client-go's messages name a Lease as namespace/name.
        if clue.kind is ClueKind.NAME and clue.value in (self.key, self.name):
            return Match(Sureness.CERTAIN, f"Lease {self.key}, which the text names")
        return Facts.named_by(self, lock, clue)

    def series(self, lock: Lock) -> Sequence[Series]:
        """serve's gauges of a Lease: how long its holder has held it (acquireTime),
        how long lockwatch has seen no renewal, its transitions, its queue."""
        out = [
            Series(
                "lockwatch_k8s_lease_candidates",
                "LeaseCandidates waiting for a Lease.",
                self.server,
                value=float(len(self.candidates)),
            ),
        ]
        if self.holder:
            # A free Lease is renewed by nobody: its unrenewed time would only grow,
            # and an alert on it (unrenewed past leaseDurationSeconds) would fire.
            out.append(
                Series(
                    "lockwatch_k8s_lease_unrenewed_seconds",
                    "Seconds lockwatch has seen no change of a held Lease's record"
                    " (client-go's observed time): past leaseDurationSeconds, candidates"
                    " take it.",
                    self.server,
                    since=self.observed_at,
                )
            )
        if self.holder and self.acquire_time is not None:
            out.append(
                Series(
                    "lockwatch_k8s_lease_holder_age_seconds",
                    "Seconds since a Lease's holder acquired it (acquireTime).",
                    self.server,
                    since=self.acquire_time,
                )
            )
        if self.transitions is not None:
            out.append(
                Series(
                    "lockwatch_k8s_lease_transitions",
                    "A Lease's leaseTransitions: how often leadership changed hands.",
                    self.server,
                    value=float(self.transitions),
                )
            )
        return out

    # --- the Contention view: candidates wait on the holder -----------------------

    def holds_as(self) -> tuple[str, str, str] | None:
        return (self.namespace, self.name, self.holder) if self.holder else None

    def waiter_count(self) -> int:
        return len(self.candidates)

    def tree_node(self) -> tuple[tuple[str, str, str], str] | None:
        if not self.holder:
            return None
        return (self.namespace, self.name, self.holder), f"{self.holder} (holds {self.key})"

    def party(self, lock: Lock) -> Party | None:
        if not self.holder:
            return None
        return Party((self.namespace, self.name, self.holder), True, f"Lease {self.key}")


@dataclass(frozen=True, slots=True)
class CandidateFacts(ClusterObject):
    """A LeaseCandidate (coordinated leader election): a component that wants the
    Lease `lease` and waits while another holds it. Its `name` is the
    LeaseCandidate's."""

    lease: str  # spec.leaseName
    holder: str  # the Lease's holderIdentity now ("": nobody, or no such Lease)
    ping_time: datetime | None
    renew_time: datetime | None
    binary_version: str
    emulation_version: str
    strategy: str
    polled_at: datetime

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.lease}"

    def judged(self, now: datetime) -> Verdict:
        return judge_candidate(self, now)

    def kind_record(self) -> dict[str, Any]:
        return dict(
            lease=self.lease,
            candidate=self.name,
            blocked_by=[self.holder] if self.holder else [],
            renew_time=self.renew_time,
            binary_version=self.binary_version or None,
            emulation_version=self.emulation_version or None,
            strategy=self.strategy or None,
        )

    def holder_text(self, lock: Lock) -> str:
        return f"candidate {self.name}"

    def where(self, lock: Lock) -> str:
        return f"k8s {self.server} leasecandidate {self.namespace}/{self.name}"

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:
        return (Section("Kubernetes LeaseCandidate", candidate_rows(self, now)),)

    def matches_text(self, needle: str) -> bool:
        return needle in self.name.lower() or needle in self.namespace.lower()

    def waiting_since(self, lock: Lock) -> datetime | None:
        return None

    def waits(self) -> tuple[tuple[str, str, str], tuple[tuple[str, str, str], ...]] | None:
        node = (self.namespace, self.lease, f"candidate {self.name}")
        return node, ((self.namespace, self.lease, self.holder),) if self.holder else ()

    def party(self, lock: Lock) -> Party:
        node = (self.namespace, self.lease, f"candidate {self.name}")
        return Party(node, False, f"Lease {self.key}")
