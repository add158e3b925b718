"""How client-go's leader election judges a Lease, and lockwatch with it.

client-go (tools/leaderelection/leaderelection.go) never compares clocks: a
candidate keeps the record it last saw and the time *it* saw it change
(`observedTime`, set whenever the record's bytes differ from the last read), and
takes the Lease once `observedTime + leaseDurationSeconds` has passed on its own
clock with no change seen (`isLeaseValid`). lockwatch does the same: it notes
when it first saw each record (holderIdentity, leaseDurationSeconds,
acquireTime, renewTime, leaseTransitions, strategy, preferredHolder), and a
Lease whose record it has watched unchanged for leaseDurationSeconds is
`stale (k8s_past_due)`: a candidate running now would take it.

The first sight of a Lease has no such history (every `lockwatch ls` is one):
a candidate starting now would wait leaseDurationSeconds before taking it, and
so does lockwatch before it says `stale`. For that window it compares renewTime
with the API server's clock (its Date header; this host's when it sends none)
and says what that shows: `unknown (k8s_past_due_by_clock)` when renewTime is
further behind than the Lease's duration. That is a comparison of two clocks
(the holder's, which wrote renewTime, and the API server's), which is what
split brains after a clock change are made of (kubernetes#125761), so it is
never a verdict of past due by itself: once lockwatch has watched the Lease for
leaseDurationSeconds, its own observation decides (`stale (k8s_past_due)`, or
`active`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lockwatch.model.humanize import duration as words
from lockwatch.model.lock import Reason
from lockwatch.model.verdict import State, Verdict

if TYPE_CHECKING:
    from lockwatch.model.facts import Row
    from lockwatch.sources.k8s.facts import CandidateFacts, LeaseFacts

# What lockwatch knows of the holder's pod (holderIdentity read as a pod name, or
# `<hostname>_<uuid>` as kube-controller-manager and kube-scheduler write it).
POD_RUNNING = "running"
POD_NOT_RUNNING = "not-running"  # its pod is there, but Succeeded/Failed or being deleted
POD_GONE = "gone"  # no pod of that name in the Lease's namespace
POD_UNKNOWN = "unknown"  # pods could not be read (RBAC: pod_detail says what is missing)
POD_NOT_A_POD = ""  # nobody holds it, or its holder is a node (kube-node-lease)

# Holder changes lockwatch saw within FLAP_WINDOW seconds, from which a Lease flaps.
FLAP_WINDOW = 600.0
FLAP_CHANGES = 3

PAST_DUE = "k8s_past_due"
PAST_DUE_BY_CLOCK = "k8s_past_due_by_clock"
POD_IS_GONE = "k8s_holder_pod_gone"
POD_STOPPED = "k8s_holder_pod_not_running"
POD_UNREADABLE = "k8s_holder_pod_unknown"
FLAPPING = "k8s_flapping"
CLOCK_SKEW = "k8s_renew_time_skew"
NO_DURATION = "k8s_no_lease_duration"
NO_HOLDER = "k8s_no_holder"
WARNINGS = frozenset({POD_IS_GONE, POD_STOPPED, FLAPPING, CLOCK_SKEW})


def _seconds(delta: timedelta) -> float:
    return delta.total_seconds()


def clock_age(facts: LeaseFacts) -> float | None:
    """renewTime's age by the API server's clock at the poll (this host's, when the
    server sent no Date): a comparison of clocks, never the verdict alone."""
    if facts.renew_time is None:
        return None
    return _seconds((facts.server_time or facts.polled_at) - facts.renew_time)


def _holder_notes(facts: LeaseFacts) -> list[Reason]:
    notes: list[Reason] = []
    if facts.pod == POD_GONE:
        notes.append(Reason(POD_IS_GONE, f"holder pod gone: {facts.pod_detail}"))
    elif facts.pod == POD_NOT_RUNNING:
        notes.append(Reason(POD_STOPPED, f"holder pod not running: {facts.pod_detail}"))
    elif facts.pod == POD_UNKNOWN:
        notes.append(Reason(POD_UNREADABLE, f"holder pod unknown: {facts.pod_detail}"))
    if facts.recent_changes >= FLAP_CHANGES:
        notes.append(
            Reason(
                FLAPPING,
                f"leadership changed hands {facts.recent_changes} times in the last"
                f" {words(FLAP_WINDOW)} (leaseTransitions {facts.transitions})",
            )
        )
    return notes


def judge_lease(facts: LeaseFacts, now: datetime) -> Verdict:
    age = None
    if facts.acquire_time is not None:
        age = max(0.0, _seconds(now - facts.acquire_time))
    if not facts.holder:
        why = "no holderIdentity: released (or broken); the next candidate to try takes it"
        return Verdict(State.FREE, (Reason(NO_HOLDER, why),))
    notes = _holder_notes(facts)
    if not facts.duration or facts.duration <= 0:
        why = "no leaseDurationSeconds: nobody can say when its holder's claim lapses"
        return Verdict(State.UNKNOWN, (Reason(NO_DURATION, why), *notes), age_seconds=age)
    lease = timedelta(seconds=facts.duration)
    due = facts.observed_at + lease
    unchanged = _seconds(now - facts.observed_at)
    if now >= due:
        why = (
            f"no renewal seen for {words(unchanged)} (leaseDurationSeconds {facts.duration}):"
            f" a candidate would take it now"
        )
        return Verdict(State.STALE, (Reason(PAST_DUE, why), *notes), age_seconds=age)
    behind = clock_age(facts)
    if not facts.watched_change and behind is not None and behind > facts.duration:
        clock = "the API server's clock" if facts.server_time else "this host's clock"
        # Clocks alone never make it past due (client-go's rule): unknown until watched.
        why = (
            f"renewTime is {words(behind)} old by {clock}, past its {facts.duration}s;"
            f" a clock comparison, so not past due until lockwatch has watched it unrenewed"
            f" until {due:%H:%M:%S}"
        )
        return Verdict(
            State.UNKNOWN,
            (Reason(PAST_DUE_BY_CLOCK, why), *notes),
            age_seconds=age,
            next_change_at=due,
        )
    if facts.watched_change and behind is not None and behind > 2 * facts.duration + 5:
        notes.append(
            Reason(
                CLOCK_SKEW,
                f"renewed as lockwatch watches, yet renewTime is {words(behind)} behind the"
                " API server's clock: the holder's clock is off (candidates judge by what"
                " they observe, so they still wait)",
            )
        )
    return Verdict(State.ACTIVE, tuple(notes), age_seconds=age, next_change_at=due)


def judge_candidate(facts: CandidateFacts, now: datetime) -> Verdict:
    if facts.holder:
        why = f"candidate for Lease {facts.key}, held by {facts.holder}"
    else:
        why = f"candidate for Lease {facts.key}, which nobody holds now"
    return Verdict(State.WAITING, (Reason("k8s_candidate", why),))


def _when(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "-"
    ago = _seconds(now - at)
    return f"{at:%Y-%m-%d %H:%M:%S} ({words(abs(ago))} {'ago' if ago >= 0 else 'ahead'})"


def lease_rows(facts: LeaseFacts, now: datetime) -> tuple[Row, ...]:
    rows: list[Row] = [
        ("server", facts.server),
        ("lease", facts.key),
        ("holder", facts.holder or "nobody"),
        ("duration", f"{facts.duration}s" if facts.duration else "-"),
        ("acquired", _when(facts.acquire_time, now)),
        ("renewed", _when(facts.renew_time, now)),
        ("unchanged", f"{words(_seconds(now - facts.observed_at))} as lockwatch saw it"),
        ("transitions", "-" if facts.transitions is None else str(facts.transitions)),
        ("version", facts.resource_version),
    ]
    if facts.pod:
        rows.append(("pod", f"{facts.pod}: {facts.pod_detail}"))
    if facts.candidates:
        rows.append(("candidates", ", ".join(facts.candidates)))
    if facts.strategy:
        rows.append(("strategy", facts.strategy))
    if facts.preferred_holder:
        rows.append(("preferred", facts.preferred_holder))
    return tuple(rows)


def candidate_rows(facts: CandidateFacts, now: datetime) -> tuple[Row, ...]:
    return (
        ("server", facts.server),
        ("candidate", f"{facts.namespace}/{facts.name}"),
        ("lease", facts.key),
        ("holder", facts.holder or "nobody"),
        ("renewed", _when(facts.renew_time, now)),
        ("pinged", _when(facts.ping_time, now)),
        ("versions", f"{facts.binary_version or '-'} / {facts.emulation_version or '-'}"),
        ("strategy", facts.strategy or "-"),
    )
