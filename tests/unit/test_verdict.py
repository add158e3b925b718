"""Every staleness rule at its boundary, with a frozen clock and a fixed process table.

The process table (conftest `processes`): pid 100 runs since an hour ago, every other
pid is dead. Ages are given in seconds before NOW; `MS` is one millisecond.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.assess import assess
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.process import HostPid, ProcessFacts, ProcessLookup, StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate, same_host
from lockwatch.sources.files.decoders import clawdbot, generic, gitclaw, little_loops, tower_fleet
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.policy import StalenessPolicy
from tests.conftest import LOCAL_HOST, NOW, ago, alive

MS = 0.001
LIVE_PID = 100
DEAD_PID = 200


def at(seconds_from_now: float) -> datetime:
    return NOW + timedelta(seconds=seconds_from_now)


def make_lock(
    policy: StalenessPolicy,
    *,
    fmt: str = "test",
    pid: int | None = LIVE_PID,
    host: str | None = None,
    acquired_at: datetime | None = NOW,
    heartbeat_at: datetime | None = None,
    ttl: float | None = None,
    defects: tuple[Reason, ...] = (),
    notes: tuple[Reason, ...] = (),
    name: str = "lock",
) -> Lock:
    return Lock(
        id=f"file:/locks/{name}.lock",
        source="file",
        format=fmt,
        name=name,
        path=f"/locks/{name}.lock",
        holder=Holder(pid=pid, host=host),
        acquired_at=acquired_at,
        heartbeat_at=heartbeat_at,
        ttl_seconds=ttl,
        defects=defects,
        notes=notes,
        facts=FileFacts(policy),
    )


def claw(age: float, *, pid: int | None = LIVE_PID, host: str | None = LOCAL_HOST) -> Lock:
    return make_lock(clawdbot.POLICY, fmt=clawdbot.FORMAT, pid=pid, host=host, acquired_at=ago(age))


def gitc(age: float, *, pid: int | None = LIVE_PID) -> Lock:
    return make_lock(gitclaw.POLICY, fmt=gitclaw.FORMAT, pid=pid, acquired_at=ago(age), ttl=600.0)


def tower(
    since_heartbeat: float,
    *,
    ttl: float = 900.0,
    pid: int | None = LIVE_PID,
    host: str | None = LOCAL_HOST,
    created_age: float = 3000.0,
) -> Lock:
    return make_lock(
        tower_fleet.POLICY,
        fmt=tower_fleet.FORMAT,
        pid=pid,
        host=host,
        acquired_at=ago(created_age),
        heartbeat_at=ago(since_heartbeat),
        ttl=ttl,
    )


def loops(age: float = 60.0, *, pid: int | None = LIVE_PID) -> Lock:
    return make_lock(little_loops.POLICY, fmt=little_loops.FORMAT, pid=pid, acquired_at=ago(age))


def gen(age: float = 60.0, *, pid: int | None = LIVE_PID, host: str | None = None) -> Lock:
    return make_lock(generic.POLICY, fmt=generic.FORMAT, pid=pid, host=host, acquired_at=ago(age))


def judge(lock: Lock, processes: ProcessLookup | None = None) -> Verdict:
    table = processes if processes is not None else StaticProcesses(alive(LIVE_PID))
    return evaluate(lock, table, FrozenClock(NOW), LOCAL_HOST)


class NoLookups:
    """A process table that fails the test if anybody asks it anything."""

    def facts(self, pid: int) -> ProcessFacts:
        raise AssertionError(f"pid {pid} must not be checked")

    def host_pid(self, pid: int, namespace: int) -> HostPid:
        raise AssertionError(f"pid {pid} of pid namespace {namespace:x} must not be looked up")


def started(seconds_after: float, lock_age: float, pid: int = LIVE_PID) -> StaticProcesses:
    """A live `pid` whose process started `seconds_after` the lock of age `lock_age`."""
    return StaticProcesses(alive(pid, started_seconds_ago=lock_age - seconds_after))


# --- clawdbot: pid + 30 s, foreign host 10 s ------------------------------------


@pytest.mark.parametrize("age", [0.0, 1.0, 30.0 - MS, 30.0])
def test_clawdbot_active_up_to_30s(age: float) -> None:
    verdict = judge(claw(age))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ()
    assert verdict.alive is True
    assert verdict.process is not None and verdict.process.pid == LIVE_PID
    assert verdict.age_seconds == pytest.approx(age, abs=1e-6)


@pytest.mark.parametrize("age", [30.0 + MS, 31.0, 3600.0])
def test_clawdbot_too_old_past_30s(age: float) -> None:
    verdict = judge(claw(age))
    assert verdict.state is State.STALE
    assert verdict.codes == ("too_old",)
    assert verdict.alive is True
    assert "30s" in verdict.reasons[0].message


def test_clawdbot_dead_local_pid_is_holder_dead() -> None:
    verdict = judge(claw(1.0, pid=DEAD_PID))
    assert verdict.state is State.STALE
    assert verdict.codes == ("holder_dead",)
    assert str(DEAD_PID) in verdict.reasons[0].message
    assert verdict.alive is False
    assert verdict.process is None


def test_clawdbot_dead_and_too_old_reports_both() -> None:
    verdict = judge(claw(45.0, pid=DEAD_PID))
    assert verdict.state is State.STALE
    assert set(verdict.codes) == {"holder_dead", "too_old"}


@pytest.mark.parametrize("host", ["DESKTOP-O6IL62J", "other-box", "tower-02.lan"])
@pytest.mark.parametrize("age", [0.0, 10.0 - MS, 10.0])
def test_clawdbot_foreign_host_active_up_to_10s_pid_unchecked(host: str, age: float) -> None:
    verdict = judge(claw(age, pid=DEAD_PID, host=host), NoLookups())
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("foreign_host",)
    assert host in verdict.reasons[0].message
    assert verdict.alive is None
    assert verdict.process is None


@pytest.mark.parametrize("age", [10.0 + MS, 20.0, 30.0 + MS])
def test_clawdbot_foreign_host_too_old_past_10s(age: float) -> None:
    verdict = judge(claw(age, pid=DEAD_PID, host="DESKTOP-O6IL62J"), NoLookups())
    assert verdict.state is State.STALE
    assert verdict.codes == ("too_old", "foreign_host")
    assert "DESKTOP-O6IL62J" in verdict.reasons[0].message
    assert verdict.alive is None


@pytest.mark.parametrize("host", [LOCAL_HOST, "TESTHOST", "testhost.lan", "localhost", "", None])
def test_clawdbot_local_spellings_check_the_pid(host: str | None) -> None:
    verdict = judge(claw(1.0, pid=DEAD_PID, host=host))
    assert verdict.state is State.STALE
    assert verdict.codes == ("holder_dead",)


def test_clawdbot_without_pid_is_judged_by_age_only() -> None:
    young, old = judge(claw(5.0, pid=None)), judge(claw(30.0 + MS, pid=None))
    assert (young.state, young.codes, young.alive) == (State.ACTIVE, (), None)
    assert (old.state, old.codes) == (State.STALE, ("too_old",))


# --- gitclaw: age >= 600 s --------------------------------------------------------


@pytest.mark.parametrize("age", [0.0, 300.0, 600.0 - MS])
def test_gitclaw_active_below_600s(age: float) -> None:
    verdict = judge(gitc(age))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ()


@pytest.mark.parametrize("age", [600.0, 600.0 + MS, 86400.0])
def test_gitclaw_stale_from_600s_inclusive(age: float) -> None:
    verdict = judge(gitc(age))
    assert verdict.state is State.STALE
    assert verdict.codes == ("too_old",)
    assert "10m00s" in verdict.reasons[0].message


def test_gitclaw_dead_pid_is_no_staleness_reason() -> None:
    verdict = judge(gitc(10.0, pid=DEAD_PID))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ()
    assert verdict.alive is False


def test_gitclaw_live_pid_is_shown_alive() -> None:
    verdict = judge(gitc(10.0))
    assert verdict.alive is True
    assert verdict.process is not None and verdict.process.cmdline == ("worker",)


def test_gitclaw_reused_pid_is_no_staleness_reason() -> None:
    verdict = judge(gitc(100.0), started(seconds_after=50.0, lock_age=100.0))
    assert verdict.state is State.ACTIVE
    assert "pid_reused" not in verdict.codes
    assert verdict.alive is False
    assert verdict.process is None


# --- tower-fleet: heartbeat vs ttl, pid informational -----------------------------


@pytest.mark.parametrize("since", [0.0, 100.0, 300.0])
def test_tower_fleet_fresh_heartbeat_is_active_without_reasons(since: float) -> None:
    verdict = judge(tower(since))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ()


@pytest.mark.parametrize("since", [300.0 + MS, 600.0, 900.0 - MS, 900.0])
def test_tower_fleet_late_heartbeat_within_ttl_is_active_and_late(since: float) -> None:
    verdict = judge(tower(since))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("heartbeat_late",)


@pytest.mark.parametrize("since", [900.0 + MS, 901.0, 86400.0])
def test_tower_fleet_heartbeat_expired_past_ttl(since: float) -> None:
    verdict = judge(tower(since))
    assert verdict.state is State.STALE
    assert verdict.codes == ("heartbeat_expired",)
    assert "15m00s" in verdict.reasons[0].message


@pytest.mark.parametrize(
    ("ttl", "since", "codes", "state"),
    [
        (30.0, 10.0, (), State.ACTIVE),
        (30.0, 10.0 + MS, ("heartbeat_late",), State.ACTIVE),
        (30.0, 30.0, ("heartbeat_late",), State.ACTIVE),
        (30.0, 30.0 + MS, ("heartbeat_expired",), State.STALE),
        (1.0, 1.0 + MS, ("heartbeat_expired",), State.STALE),
    ],
)
def test_tower_fleet_other_ttls(
    ttl: float, since: float, codes: tuple[str, ...], state: State
) -> None:
    verdict = judge(tower(since, ttl=ttl))
    assert (verdict.state, verdict.codes) == (state, codes)


def test_tower_fleet_old_creation_does_not_matter() -> None:
    verdict = judge(tower(5.0, created_age=30 * 86400.0))
    assert verdict.state is State.ACTIVE
    assert verdict.age_seconds == pytest.approx(30 * 86400.0)


def test_tower_fleet_dead_pid_is_shown_but_never_stale() -> None:
    verdict = judge(tower(5.0, pid=DEAD_PID))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ()
    assert verdict.alive is False
    assert verdict.process is None


def test_tower_fleet_live_pid_is_shown_alive() -> None:
    verdict = judge(tower(5.0))
    assert verdict.alive is True
    assert verdict.process is not None and verdict.process.pid == LIVE_PID


def test_tower_fleet_live_pid_does_not_save_an_expired_heartbeat() -> None:
    verdict = judge(tower(900.0 + MS))
    assert verdict.state is State.STALE
    assert verdict.alive is True


def test_tower_fleet_reused_pid_is_no_staleness_reason() -> None:
    verdict = judge(tower(5.0, created_age=600.0), started(seconds_after=100.0, lock_age=600.0))
    assert verdict.state is State.ACTIVE
    assert "pid_reused" not in verdict.codes
    assert verdict.alive is False
    assert verdict.process is None


def test_tower_fleet_foreign_host_is_judged_by_heartbeat_only() -> None:
    fresh = judge(tower(5.0, pid=DEAD_PID, host="tower-01"), NoLookups())
    assert (fresh.state, fresh.codes, fresh.alive) == (State.ACTIVE, ("foreign_host",), None)
    expired = judge(tower(900.0 + MS, host="tower-01"), NoLookups())
    assert expired.state is State.STALE
    assert expired.codes == ("heartbeat_expired", "foreign_host")


# --- little-loops: pid only ---------------------------------------------------------


@pytest.mark.parametrize("age", [0.0, 30.0 + MS, 600.0, 30 * 86400.0])
def test_little_loops_live_pid_is_active_at_any_age(age: float) -> None:
    holder_since_before = StaticProcesses(alive(LIVE_PID, started_seconds_ago=age + 5.0))
    verdict = judge(loops(age), holder_since_before)
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ()
    assert verdict.alive is True
    assert verdict.next_change_at is None


def test_little_loops_dead_pid_is_holder_dead() -> None:
    verdict = judge(loops(1.0, pid=DEAD_PID))
    assert verdict.state is State.STALE
    assert verdict.codes == ("holder_dead",)
    assert verdict.alive is False


# --- generic ------------------------------------------------------------------------


def test_generic_live_pid_is_active() -> None:
    verdict = judge(gen(86400.0), StaticProcesses(alive(LIVE_PID, started_seconds_ago=90000.0)))
    assert (verdict.state, verdict.codes, verdict.alive) == (State.ACTIVE, (), True)


def test_generic_dead_pid_is_holder_dead() -> None:
    verdict = judge(gen(pid=DEAD_PID))
    assert (verdict.state, verdict.codes, verdict.alive) == (State.STALE, ("holder_dead",), False)


def test_generic_without_pid_is_active_with_its_notes() -> None:
    note = Reason("no_pid", "no process")
    lock = make_lock(
        generic.POLICY, fmt=generic.FORMAT, pid=None, acquired_at=ago(5.0), notes=(note,)
    )
    verdict = judge(lock)
    assert (verdict.state, verdict.reasons, verdict.alive) == (State.ACTIVE, (note,), None)


def test_generic_foreign_host_pid_is_not_checked() -> None:
    verdict = judge(gen(pid=DEAD_PID, host="elsewhere"), NoLookups())
    assert (verdict.state, verdict.codes, verdict.alive) == (State.ACTIVE, ("foreign_host",), None)


# --- pid reuse ------------------------------------------------------------------------

PID_LIVENESS: dict[str, Callable[[], Lock]] = {
    "clawdbot": lambda: claw(10.0),
    "little-loops": lambda: loops(10.0),
    "generic": lambda: gen(10.0),
}


@pytest.mark.parametrize("make", PID_LIVENESS.values(), ids=PID_LIVENESS.keys())
@pytest.mark.parametrize("seconds_after", [1.0 + MS, 2.0, 9.0])
def test_pid_started_after_the_lock_is_reused(
    make: Callable[[], Lock], seconds_after: float
) -> None:
    lock = make()
    verdict = judge(lock, started(seconds_after, lock_age=10.0))
    assert verdict.state is State.STALE
    assert verdict.codes == ("pid_reused",)
    assert str(LIVE_PID) in verdict.reasons[0].message
    assert verdict.alive is False
    assert verdict.process is None


@pytest.mark.parametrize("make", PID_LIVENESS.values(), ids=PID_LIVENESS.keys())
@pytest.mark.parametrize("seconds_after", [1.0, 0.5, 0.0, -1.0, -3000.0])
def test_pid_started_within_tolerance_or_before_is_the_holder(
    make: Callable[[], Lock], seconds_after: float
) -> None:
    lock = make()
    verdict = judge(lock, started(seconds_after, lock_age=10.0))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ()
    assert verdict.alive is True
    assert verdict.process is not None


def test_pid_reuse_unknown_start_time_is_not_reuse() -> None:
    hidden = StaticProcesses(ProcessFacts(pid=LIVE_PID, alive=True, started_at=None))
    verdict = judge(loops(10.0), hidden)
    assert (verdict.state, verdict.alive) == (State.ACTIVE, True)


def test_pid_reuse_and_too_old_both_reported() -> None:
    verdict = judge(claw(40.0), started(seconds_after=20.0, lock_age=40.0))
    assert verdict.state is State.STALE
    assert set(verdict.codes) == {"pid_reused", "too_old"}


# --- clock skew -------------------------------------------------------------------


def test_future_acquired_at_is_clock_skew_with_age_zero() -> None:
    verdict = judge(claw(-5.0))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("clock_skew",)
    assert verdict.age_seconds == 0.0
    assert "5s" in verdict.reasons[0].message


def test_far_future_gitclaw_lock_is_not_too_old() -> None:
    verdict = judge(gitc(-3600.0))
    assert (verdict.state, verdict.codes, verdict.age_seconds) == (
        State.ACTIVE,
        ("clock_skew",),
        0.0,
    )


def test_future_heartbeat_is_clock_skew_and_active() -> None:
    verdict = judge(tower(-30.0))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("clock_skew",)


def test_future_creation_and_heartbeat_both_skewed() -> None:
    verdict = judge(tower(-30.0, created_age=-60.0))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("clock_skew",)  # one disagreement, said once
    assert verdict.age_seconds == 0.0


@pytest.mark.parametrize(("ahead", "skewed"), [(0.5, False), (1.0, False), (1.5, True)])
def test_clock_skew_tolerates_a_second(ahead: float, skewed: bool) -> None:
    verdict = judge(claw(-ahead))
    assert ("clock_skew" in verdict.codes) is skewed
    assert verdict.age_seconds == 0.0


def test_acquired_exactly_now_is_not_skew() -> None:
    verdict = judge(claw(0.0))
    assert verdict.codes == ()
    assert verdict.age_seconds == 0.0


# --- invalid ------------------------------------------------------------------------


def test_defects_make_the_lock_invalid_whatever_else() -> None:
    defect = Reason("schema_violation", "field 'pid' must be an integer")
    lock = make_lock(
        clawdbot.POLICY, pid=DEAD_PID, acquired_at=ago(3600.0), host=LOCAL_HOST, defects=(defect,)
    )
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.reasons == (defect,)
    assert verdict.alive is None
    assert verdict.next_change_at is None
    assert verdict.age_seconds == pytest.approx(3600.0)


def test_invalid_lock_keeps_every_defect_first() -> None:
    defects = (Reason("schema_violation", "a"), Reason("schema_violation", "b"))
    verdict = judge(make_lock(tower_fleet.POLICY, acquired_at=at(10.0), defects=defects))
    assert verdict.state is State.INVALID
    assert verdict.reasons[:2] == defects
    assert verdict.codes == ("schema_violation", "schema_violation", "clock_skew")


# --- next_change_at -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lock", "expected"),
    [
        (claw(10.0), at(20.0)),
        (claw(30.0 - MS), at(MS)),
        (claw(4.0, host="DESKTOP-O6IL62J"), at(6.0)),
        (claw(-5.0), at(35.0)),
        (gitc(100.0), at(500.0)),
        (gitc(600.0 - MS), at(MS)),
        # fresh: the next change is turning late at ttl/3
        (tower(100.0), at(200.0)),
        # late: the next change is expiring at ttl
        (tower(400.0), at(500.0)),
        (tower(900.0 - MS), at(MS)),
    ],
    ids=[
        "clawdbot",
        "clawdbot-1ms",
        "clawdbot-foreign",
        "clawdbot-skew",
        "gitclaw",
        "gitclaw-1ms",
        "tower-fresh",
        "tower-late",
        "tower-1ms",
    ],
)
def test_next_change_at_is_the_nearest_future_deadline(lock: Lock, expected: datetime) -> None:
    verdict = judge(lock)
    assert verdict.state is State.ACTIVE
    assert verdict.next_change_at is not None
    assert abs((verdict.next_change_at - expected).total_seconds()) < 1e-6


@pytest.mark.parametrize(
    "lock",
    [claw(31.0), claw(1.0, pid=DEAD_PID), gitc(600.0), tower(901.0), loops(5.0), gen(5.0)],
    ids=["too-old", "dead", "gitclaw-stale", "expired", "little-loops", "generic"],
)
def test_no_next_change_when_stale_or_time_never_matters(lock: Lock) -> None:
    assert judge(lock).next_change_at is None


def test_deadline_beyond_the_calendar_does_not_crash() -> None:
    far = datetime.max.replace(tzinfo=UTC) - timedelta(seconds=1)
    verdict = judge(make_lock(clawdbot.POLICY, acquired_at=far, host=LOCAL_HOST))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("clock_skew",)
    assert verdict.next_change_at is None


def test_ancient_lock_is_stale_not_a_crash() -> None:
    ancient = datetime.min.replace(tzinfo=UTC)
    verdict = judge(make_lock(gitclaw.POLICY, acquired_at=ancient))
    assert verdict.state is State.STALE
    assert verdict.codes == ("too_old",)


def test_frozen_clock_moves_the_verdict() -> None:
    lock = claw(0.0)
    clock = FrozenClock(NOW)
    table = StaticProcesses(alive(LIVE_PID))
    assert evaluate(lock, table, clock, LOCAL_HOST).state is State.ACTIVE
    clock.advance(30.0)
    assert evaluate(lock, table, clock, LOCAL_HOST).state is State.ACTIVE
    clock.advance(MS)
    assert evaluate(lock, table, clock, LOCAL_HOST).state is State.STALE


# --- same_host ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "local", "same"),
    [
        ("testhost", "testhost", True),
        ("TestHost", "testhost", True),
        ("testhost", "TESTHOST", True),
        ("DESKTOP-O6IL62J", "desktop-o6il62j", True),
        ("testhost.lan", "testhost", True),
        ("testhost", "testhost.example.com", True),
        ("testhost.example.com", "TESTHOST.example.com", True),
        ("  testhost\n", "testhost", True),
        ("localhost", "testhost", True),
        ("LOCALHOST", "testhost", True),
        ("127.0.0.1", "testhost", True),
        ("::1", "testhost", True),
        ("", "testhost", True),
        ("otherhost", "testhost", False),
        ("testhost2", "testhost", False),
        ("test", "testhost", False),
        ("other.testhost", "testhost", False),
        ("tower-01", "tower-02", False),
        ("tower-01.lan", "tower-02.lan", False),
    ],
)
def test_same_host(recorded: str, local: str, same: bool) -> None:
    assert same_host(recorded, local) is same


@pytest.mark.parametrize(
    ("recorded", "local"), [("10.0.0.1", "10.0.0.2"), ("192.168.1.5", "192.168.7.9")]
)
def test_different_ip_addresses_are_different_hosts(recorded: str, local: str) -> None:
    assert same_host(recorded, local) is False


# --- assess -------------------------------------------------------------------------


class TickingClock:
    """Moves 1 s every time it is read: a set judged together must read it once."""

    def __init__(self) -> None:
        self.reads = 0

    def now(self) -> datetime:
        self.reads += 1
        return NOW + timedelta(seconds=self.reads - 1)


def test_assess_judges_every_lock_at_one_instant() -> None:
    locks = [claw(30.0, pid=LIVE_PID), claw(30.0, pid=LIVE_PID), claw(29.5)]
    clock = TickingClock()
    assessed = assess(locks, StaticProcesses(alive(LIVE_PID)), clock, LOCAL_HOST)
    assert clock.reads == 1
    assert [lock for lock, _ in assessed] == locks
    assert [v.state for _, v in assessed] == [State.ACTIVE] * 3


def test_assess_matches_evaluate_for_unrelated_locks() -> None:
    locks = [claw(31.0), gitc(5.0), tower(901.0), loops(pid=DEAD_PID), gen()]
    table = StaticProcesses(alive(LIVE_PID))
    assessed = assess(locks, table, FrozenClock(NOW), LOCAL_HOST)
    assert [v for _, v in assessed] == [judge(lock) for lock in locks]
    assert [v.state for _, v in assessed] == [
        State.STALE,
        State.ACTIVE,
        State.STALE,
        State.STALE,
        State.ACTIVE,
    ]


# --- pid namespaces: what nobody can tell is unknown ------------------------------


def test_a_pid_marked_as_another_namespaces_is_unknown_never_checked() -> None:
    lock = make_lock(StalenessPolicy(pid_liveness=True), host=LOCAL_HOST)
    marked = replace(lock, holder=replace(lock.holder, other_pid_namespace=True))
    verdict = judge(marked, NoLookups())
    assert verdict.state is State.UNKNOWN
    assert verdict.codes == ("other_pid_namespace",)
    assert verdict.alive is None and verdict.process is None


NS = 0xF0000152


def in_namespace(pid: int = 1) -> Lock:
    """A lock whose holder is pid `pid` of pid namespace NS, the file naming it."""
    lock = make_lock(
        StalenessPolicy(pid_liveness=True), pid=pid, host=LOCAL_HOST, acquired_at=ago(60.0)
    )
    holder = replace(lock.holder, other_pid_namespace=True, pid_namespace=NS)
    return replace(lock, holder=holder)


def test_a_named_namespace_found_here_maps_the_holder_to_its_pid_here() -> None:
    table = StaticProcesses(alive(4242), namespaces={NS: {1: 4242}})
    verdict = judge(in_namespace(), table)
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("pid_namespace",)
    assert "is pid 4242 on this host" in verdict.reasons[0].message
    assert verdict.process is not None and verdict.process.pid == 4242


def test_a_named_namespace_found_here_with_a_recycled_pid_is_stale() -> None:
    table = StaticProcesses(alive(4242, started_seconds_ago=1.0), namespaces={NS: {1: 4242}})
    assert judge(in_namespace(), table).codes == ("pid_reused", "pid_namespace")


@pytest.mark.parametrize(
    ("namespaces", "why"),
    [({}, "pid namespace is gone"), ({NS: {7: 4242}}, "no process of it has that pid")],
)
def test_a_named_namespace_gone_or_without_the_pid_is_a_dead_holder(
    namespaces: dict[int, dict[int, int]], why: str
) -> None:
    verdict = judge(in_namespace(), StaticProcesses(alive(1), namespaces=namespaces))
    assert verdict.state is State.STALE
    assert verdict.codes == ("holder_dead",)
    assert why in verdict.reasons[0].message and "f0000152" in verdict.reasons[0].message
    assert verdict.alive is False and verdict.process is None


def test_a_named_namespace_nobody_here_can_look_for_is_unknown() -> None:
    verdict = judge(in_namespace(), StaticProcesses(alive(1)))
    assert verdict.state is State.UNKNOWN
    assert verdict.codes == ("other_pid_namespace",)


def test_pid_1_is_init_here_so_a_lock_naming_it_is_unknown() -> None:
    verdict = judge(make_lock(StalenessPolicy(pid_liveness=True), pid=1), NoLookups())
    assert verdict.state is State.UNKNOWN
    assert "pid 1" in verdict.reasons[0].message


def test_a_formats_own_age_rule_still_decides_an_unknown_pid() -> None:
    """clawdbot calls a lock over 30 s stale whoever holds it."""
    verdict = judge(claw(45.0, pid=1), NoLookups())
    assert verdict.state is State.STALE
    assert verdict.codes == ("too_old", "other_pid_namespace")
    assert judge(claw(5.0, pid=1), NoLookups()).state is State.UNKNOWN


def test_a_time_set_by_the_writer_never_trips_pid_reuse() -> None:
    """Only a time the acquirer recorded says the holder started after it."""
    late = started(seconds_after=30.0, lock_age=60.0)
    assert judge(gen(60.0), late).codes == ("pid_reused",)
    writer = make_lock(
        StalenessPolicy(pid_liveness=True, time_by_writer=True), acquired_at=ago(60.0)
    )
    verdict = judge(writer, late)
    assert verdict.state is State.ACTIVE and "pid_reused" not in verdict.codes


@pytest.mark.parametrize(
    ("recorded_boot", "state"),
    [(1_000_000, State.ACTIVE), (1_000_001, State.ACTIVE), (999_998, State.STALE)],
)
def test_a_recorded_boot_time_is_compared_within_a_second(recorded_boot: int, state: State) -> None:
    lock = replace(gen(pid=LIVE_PID), holder=Holder(pid=LIVE_PID, boot_time=recorded_boot))
    facts = ProcessFacts(pid=LIVE_PID, alive=True, started_at=ago(3600), boot_time=1_000_000.4)
    verdict = judge(lock, StaticProcesses(facts))
    assert verdict.state is state
    assert [r.code for r in verdict.reasons][:1] == (
        [] if state is State.ACTIVE else ["pid_reused"]
    )
