"""Kubernetes Leases as a lock source, against the fake API server (fakeapi.py:
an imitation built from the published API schema, no kube-apiserver installs
here): what is listed is what the API holds, verdicts are client-go's (by the
time lockwatch observed no renewal), holder pods, candidates, RBAC and a server
that does not answer."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import Verdict, evaluate
from lockwatch.sources.k8s import ids
from lockwatch.sources.k8s.kubeconfig import resolve
from lockwatch.sources.k8s.records import to_locks
from lockwatch.sources.k8s.server import LeaseServer
from tests.conftest import run_cli
from tests.k8s.conftest import by_name, kubeconfig, lease, listing
from tests.k8s.fakeapi import FakeApi, micro


def test_leases_are_listed_as_the_api_server_has_them(
    fake: FakeApi, config: dict[str, str]
) -> None:
    lease(fake, "kube-system", "kube-scheduler", "node1_8d2e4b7c", transitions=4)
    lease(fake, "apps", "free", None)
    fake.put("pods", "kube-system", "kube-scheduler-node1", {"phase": "Running"})
    document = listing(config)
    locks = by_name(document)
    held, free = locks["kube-system/kube-scheduler"], locks["apps/free"]
    spec = fake.spec("kube-system", "kube-scheduler")
    assert held["id"] == ids.k8s_id(fake.name, "lease", "kube-system", "kube-scheduler")
    assert held["state"] == "active" and held["reasons"] == []
    assert held["holder_identity"] == spec["holderIdentity"] == "node1_8d2e4b7c"
    assert held["lease_duration_seconds"] == 15 and held["lease_transitions"] == 4
    meta = fake.objects[("leases", "kube-system", "kube-scheduler")]["metadata"]
    assert held["resource_version"] == meta["resourceVersion"]
    # kube-scheduler's identity is <hostname>_<uuid>; its static pod is named for its node.
    assert held["holder_pod"] == "running"
    assert free["state"] == "free" and free["holder_identity"] is None
    # The last holder's times are the Lease's own fields, not a held lock's age.
    assert free["acquire_time"] is not None and free["renew_time"] is not None
    assert free["acquired_at"] is None and free["heartbeat_at"] is None
    assert free["ttl_seconds"] is None
    (source,) = document["sources"]
    assert (source["kind"], source["name"], source["status"]) == ("k8s", fake.name, "connected")


def test_a_lease_old_by_the_servers_clock_is_unknown_never_stale_at_first_sight(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """`ls` sees a Lease once: renewTime 5 minutes behind the API server's clock is a
    comparison of two clocks, which client-go never judges by; a candidate starting
    now would wait leaseDurationSeconds, and lockwatch says `unknown` meanwhile."""
    lease(fake, "apps", "web-leader", "web-7d9f-x2k4q", renewed=300)
    fake.put("pods", "apps", "web-7d9f-other", {"phase": "Running"})
    held = by_name(listing(config))["apps/web-leader"]
    assert held["state"] == "unknown"
    codes = [reason["code"] for reason in held["reasons"]]
    assert codes == ["k8s_past_due_by_clock", "k8s_holder_pod_gone"]
    assert "a clock comparison" in held["reasons"][0]["message"]
    assert "no pod web-7d9f-x2k4q in apps" in held["reasons"][1]["message"]
    assert held["holder_pod"] == "gone"
    assert held["next_change_at"] is not None  # when watching decides


def test_a_lease_old_by_the_clock_is_stale_once_watched_unrenewed_for_its_duration(
    fake: FakeApi, config: dict[str, str]
) -> None:
    start = datetime.now(UTC)
    clock = FrozenClock(start)
    lease(fake, "apps", "web-leader", "web-0", renewed=300, now=start)
    server = LeaseServer(resolve(config), clock=clock)
    try:
        _, verdict = judged(server, clock)["apps/web-leader"]
        assert verdict.state.value == "unknown"
        assert verdict.next_change_at == start + timedelta(seconds=15)
        clock.advance(14)
        _, verdict = judged(server, clock)["apps/web-leader"]
        assert verdict.state.value == "unknown"
        clock.advance(1)
        _, verdict = judged(server, clock)["apps/web-leader"]
        assert verdict.state.value == "stale" and verdict.codes[0] == "k8s_past_due"
    finally:
        server.close()


def judged(server: LeaseServer, clock: FrozenClock) -> dict[str, tuple[Any, Verdict]]:
    snapshot = server.poll()
    assert snapshot is not None, server.status
    return {
        lock.name: (lock, evaluate(lock, StaticProcesses(), clock, "host"))
        for lock in to_locks(snapshot)
    }


def test_past_due_is_judged_by_the_time_lockwatch_observed_no_renewal(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """client-go's rule: a candidate takes the Lease once leaseDurationSeconds have
    passed on its own clock since it saw the record change, whatever renewTime says."""
    start = datetime.now(UTC)
    clock = FrozenClock(start)
    lease(fake, "apps", "worker", "worker-0", renewed=1)
    fake.put("pods", "apps", "worker-0", {"phase": "Running"})
    server = LeaseServer(resolve(config), clock=clock)
    try:
        _, verdict = judged(server, clock)["apps/worker"]
        assert verdict.state.value == "active"
        assert verdict.next_change_at == start + timedelta(seconds=15)
        clock.advance(10)  # renewed in between: observed again, so due 15 s from now
        lease(fake, "apps", "worker", "worker-0", renewed=0, now=start + timedelta(seconds=10))
        _, verdict = judged(server, clock)["apps/worker"]
        assert verdict.state.value == "active"
        assert verdict.next_change_at == start + timedelta(seconds=25)
        clock.advance(15)  # no change seen for 15 s
        _, verdict = judged(server, clock)["apps/worker"]
        assert verdict.state.value == "stale" and verdict.codes == ("k8s_past_due",)
        assert "no renewal seen for 15s" in verdict.reasons[0].message
    finally:
        server.close()


def test_a_holder_whose_clock_is_behind_is_judged_by_renewals_watched_not_by_clocks(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """renewTime written by a holder whose clock is 10 minutes behind (kubernetes#125761):
    at first sight only clocks can be compared, and lockwatch says so; once it has seen
    renewals, they decide, and the skew is a warning."""
    start = datetime.now(UTC)
    clock = FrozenClock(start)
    behind = start - timedelta(minutes=10)
    lease(fake, "apps", "skewed", "skewed-0", now=behind)
    fake.put("pods", "apps", "skewed-0", {"phase": "Running"})
    server = LeaseServer(resolve(config), clock=clock)
    try:
        _, verdict = judged(server, clock)["apps/skewed"]
        assert verdict.state.value == "unknown"
        assert verdict.codes == ("k8s_past_due_by_clock",)
        assert "the API server's clock" in verdict.reasons[0].message
        clock.advance(2)
        lease(fake, "apps", "skewed", "skewed-0", now=behind + timedelta(seconds=2))
        _, verdict = judged(server, clock)["apps/skewed"]
        assert verdict.state.value == "active"
        assert verdict.codes == ("k8s_renew_time_skew",)
        assert "the holder's clock is off" in verdict.reasons[0].message
    finally:
        server.close()


def test_leadership_flapping_is_a_warning_with_the_transitions_count(
    fake: FakeApi, config: dict[str, str]
) -> None:
    clock = FrozenClock(datetime.now(UTC))
    server = LeaseServer(resolve(config), clock=clock)
    try:
        for turn in range(5):
            fake.put("pods", "apps", f"flappy-{turn % 2}", {"phase": "Running"})
            lease(fake, "apps", "flappy", f"flappy-{turn % 2}", transitions=turn)
            clock.advance(20)
            lock, verdict = judged(server, clock)["apps/flappy"]
        assert verdict.state.value == "active"
        assert verdict.codes == ("k8s_flapping",)
        assert "changed hands 4 times" in verdict.reasons[0].message
        assert "leaseTransitions 4" in verdict.reasons[0].message
        assert lock.facts is not None and "k8s_flapping" in lock.facts.warning_codes()
    finally:
        server.close()


def test_hand_overs_between_polls_count_by_lease_transitions_growth(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """A -> B -> A between two polls: the holder looks the same, leaseTransitions
    grew by 2 each time; growth within 10 minutes is the flap count, and a count
    older than that is not."""
    clock = FrozenClock(datetime.now(UTC))
    fake.put("pods", "apps", "bouncy-0", {"phase": "Running"})
    server = LeaseServer(resolve(config), clock=clock)
    try:
        for transitions in (10, 12, 14):
            lease(fake, "apps", "bouncy", "bouncy-0", transitions=transitions)
            _, verdict = judged(server, clock)["apps/bouncy"]
            clock.advance(60)
        assert verdict.codes == ("k8s_flapping",)
        assert "changed hands 4 times" in verdict.reasons[0].message
        clock.advance(600)  # ten quiet minutes later
        lease(fake, "apps", "bouncy", "bouncy-0", transitions=14, renewed=0)
        _, verdict = judged(server, clock)["apps/bouncy"]
        assert "k8s_flapping" not in verdict.codes
    finally:
        server.close()


def test_lease_candidates_wait_on_the_holder_in_the_contention_tree(
    fake: FakeApi, config: dict[str, str]
) -> None:
    now = datetime.now(UTC)
    lease(fake, "kube-system", "kube-controller-manager", "cp-1_0a1b")
    for node in ("cp-1", "cp-2", "cp-3"):
        fake.put(
            "leasecandidates",
            "kube-system",
            f"kube-controller-manager-{node}",
            {
                "leaseName": "kube-controller-manager",
                "binaryVersion": "1.33.1",
                "emulationVersion": "1.33",
                "strategy": "OldestEmulationVersion",
                "renewTime": micro(now),
                "pingTime": micro(now),
            },
        )
    document = listing(config)
    waiting = [lock for lock in document["locks"] if lock["format"] == "k8s-lease-candidate"]
    assert sorted(lock["candidate"] for lock in waiting) == [
        "kube-controller-manager-cp-1",
        "kube-controller-manager-cp-2",
        "kube-controller-manager-cp-3",
    ]
    assert all(lock["state"] == "waiting" for lock in waiting)
    assert all(lock["blocked_by"] == ["cp-1_0a1b"] for lock in waiting)
    held = by_name(document)["kube-system/kube-controller-manager"]
    assert len(held["candidates"]) == 3
    (tree,) = [tree for tree in document["blocking"] if tree["server"] == f"k8s:{fake.name}"]
    assert "cp-1_0a1b" in json.dumps(tree)


def test_a_server_without_lease_candidates_is_read_without_them(
    fake: FakeApi, config: dict[str, str]
) -> None:
    fake.served.discard("leasecandidates")
    lease(fake, "apps", "one", "one-0")
    document = listing(config)
    assert [lock["name"] for lock in document["locks"]] == ["apps/one"]
    assert document["sources"][0]["reason"] is None


def test_forbidden_pods_make_the_holder_pod_unknown_naming_what_is_missing(
    fake: FakeApi, config: dict[str, str]
) -> None:
    fake.deny("list", "pods", "apps")
    lease(fake, "apps", "web", "web-0")
    held = by_name(listing(config))["apps/web"]
    assert held["state"] == "active" and held["holder_pod"] == "unknown"
    (reason,) = held["reasons"]
    assert reason["code"] == "k8s_holder_pod_unknown"
    assert "list pods -n apps is not allowed" in reason["message"]


def test_forbidden_lease_candidates_are_said_naming_the_verb_and_resource(
    fake: FakeApi, config: dict[str, str]
) -> None:
    fake.deny("list", "leasecandidates.coordination.k8s.io")
    lease(fake, "apps", "web", "web-0")
    code, out, err = run_cli("ls", "--k8s", "--json", env=config)
    assert code == 1, err  # a partial picture
    document = json.loads(out)
    assert by_name(document)["apps/web"]["state"] == "active"
    (source,) = document["sources"]
    assert source["status"] == "connected"
    assert source["reason"] == (
        "LeaseCandidates unknown: list leasecandidates.coordination.k8s.io --all-namespaces"
        " is not allowed"
    )
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_leases_forbidden_at_cluster_scope_are_read_in_the_namespaces_named(
    fake: FakeApi, config: dict[str, str]
) -> None:
    fake.deny("list", "leases.coordination.k8s.io")  # at cluster scope only
    lease(fake, "apps", "web", "web-0")
    code, out, err = run_cli("ls", "--k8s", "--json", env=config)
    assert code == 1
    (source,) = json.loads(out)["sources"]
    assert source["status"] == "disconnected"
    assert "list leases.coordination.k8s.io at cluster scope" in source["reason"]
    assert "--k8s-namespace" in source["reason"]
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    document = listing(config, "--k8s-namespace", "apps")
    assert list(by_name(document)) == ["apps/web"]


def test_an_unreachable_server_is_disconnected_with_one_line(tmp_path: Path, fake: FakeApi) -> None:
    from tests.stores.conftest import free_port

    env = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{free_port()}"))}
    code, out, err = run_cli("ls", "--k8s", "--json", env=env)
    assert code == 1
    (source,) = json.loads(out)["sources"]
    assert source["kind"] == "k8s" and source["status"] == "disconnected"
    assert source["next_retry_at"] is not None
    assert len(err.strip().splitlines()) == 1 and err.startswith("lockwatch: k8s 127.0.0.1:")


def test_a_server_that_stops_answering_misses_the_polls_deadline(
    fake: FakeApi, config: dict[str, str]
) -> None:
    lease(fake, "apps", "web", "web-0")
    server = LeaseServer(resolve(config), deadline=1.0)
    try:
        assert server.poll() is not None
        fake.stall.set()
        assert server.poll() is None
        assert server.status.state == "disconnected"
        assert server.status.reason is not None and "stalled after 1 s" in server.status.reason
        fake.stall.clear()
        assert server.poll() is not None
        assert str(server.status.state) == "connected"
    finally:
        server.close()


@pytest.mark.parametrize(
    "line",
    [
        "I1207 14:49:03.123456   12345 leaderelection.go:250] attempting to acquire leader"
        " lease kube-system/kube-scheduler...",
        "I1207 14:49:05.000001       1 leaderelection.go:354] failed to acquire lease"
        " kube-system/kube-scheduler",
        "E1207 14:50:00.777777       1 leaderelection.go:369] failed to renew lease"
        " kube-system/kube-scheduler: timed out waiting for the condition",
        # Older releases: two spaces before the name.
        "I0312 08:00:00.000001       1 leaderelection.go:242] attempting to acquire leader"
        " lease  kube-system/kube-scheduler...",
        "E1207 14:49:05.000001       1 leaderelection.go:332] error retrieving resource lock"
        ' kube-system/kube-scheduler: leases.coordination.k8s.io "kube-scheduler" is forbidden',
        # client-go 0.31-0.34's coordinated path names the Lease after the holder.
        "I1207 14:49:05.000001       1 leaderelection.go:367] lock is held by cp-1_9f8e and"
        " has not yet expired: kube-system/kube-scheduler",
        # client-go 0.35 on: structured, klog's text form and its JSON form.
        'I0724 14:05:30.000000       1 leaderelection.go:258] "Attempting to acquire leader'
        ' lease..." lock="kube-system/kube-scheduler"',
        'I0724 14:05:30.000000       1 leaderelection.go:267] "Failed to acquire lease"'
        ' lock="kube-system/kube-scheduler"',
        'E0724 14:05:30.000000       1 leaderelection.go:323] "error retrieving resource lock"'
        ' err="leases.coordination.k8s.io \\"kube-scheduler\\" is forbidden"'
        ' lock="kube-system/kube-scheduler"',
        'I0724 14:05:30.000000       1 leaderelection.go:304] "Failed to renew lease"'
        ' lock="kube-system/kube-scheduler" err="context deadline exceeded"',
        '{"ts":1753365930000.12,"caller":"leaderelection/leaderelection.go:267",'
        '"msg":"Failed to acquire lease","v":4,"lock":"kube-system/kube-scheduler"}',
    ],
)
def test_why_recognises_client_go_lease_messages(line: str) -> None:
    from lockwatch.sources.k8s.messages import clues

    (clue,) = clues(line)
    assert (clue.kind.value, clue.value, clue.tool) == (
        "name",
        "kube-system/kube-scheduler",
        "client-go",
    )
    assert clue.options == (("k8s", True),)
    assert clue.advice


def test_why_finds_the_lease_of_the_holder_a_held_by_line_names(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """client-go's "lock is held by %v and has not yet expired" names the holder only:
    its Leases are likely, and a candidate's line finds what it waits for."""
    from lockwatch.sources.k8s.messages import clues

    lease(fake, "kube-system", "kube-scheduler", "cp-1_9f8e")
    lease(fake, "apps", "other", "web-0")
    line = (
        "I1207 14:49:05.000001       1 leaderelection.go:352] lock is held by cp-1_9f8e and"
        " has not yet expired"
    )
    (clue,) = clues(line)
    assert (clue.value, clue.said("is"), clue.tool) == ("cp-1_9f8e", "holder", "client-go")
    code, out, err = run_cli("why", "--json", line, env=config)
    assert code == 0, err
    document = json.loads(out)
    (found,) = document["locks"]
    assert found["id"] == ids.k8s_id(fake.name, "lease", "kube-system", "kube-scheduler")
    assert found["sure"] == "likely"


def test_serve_exports_holder_age_transitions_candidates_and_past_due_leases(
    fake: FakeApi, config: dict[str, str]
) -> None:
    from lockwatch.model.board import Board
    from lockwatch.model.changes import ChangeSet, judge
    from lockwatch.serve.metrics import figures
    from tests.serve.test_metrics import exposition

    start = datetime.now(UTC)
    clock = FrozenClock(start)
    lease(fake, "kube-system", "kube-scheduler", "node1_ab", transitions=6, duration=60, now=start)
    lease(fake, "apps", "dead", "dead-0", renewed=900, now=start)
    lease(fake, "apps", "free", None, now=start)
    fake.put(
        "leasecandidates",
        "kube-system",
        "kube-scheduler-cp-2",
        {
            "leaseName": "kube-scheduler",
            "binaryVersion": "1.33.1",
            "emulationVersion": "1.33",
            "strategy": "OldestEmulationVersion",
            "renewTime": micro(start),
            "pingTime": micro(start),
        },
    )
    server = LeaseServer(resolve(config), clock=clock)
    try:
        server.poll()
        clock.advance(30)  # apps/dead watched unrenewed for longer than its 15 s: past due
        snapshot = server.poll()
    finally:
        server.close()
    assert snapshot is not None
    entries = judge(to_locks(snapshot), StaticProcesses(), clock.now(), "host")
    board = Board("host")
    board.apply(ChangeSet("k8s", clock.now(), (server.status,), upserts=tuple(entries)))
    samples = exposition(figures(board, clock.now(), sources=["k8s"]))
    labels = (("name", "kube-system/kube-scheduler"), ("server", fake.name))
    assert samples[("lockwatch_k8s_lease_transitions", labels)] == 6
    assert samples[("lockwatch_k8s_lease_holder_age_seconds", labels)] == pytest.approx(3630)
    assert samples[("lockwatch_k8s_lease_unrenewed_seconds", labels)] == pytest.approx(30)
    assert samples[("lockwatch_k8s_lease_candidates", labels)] == 1
    # The candidate waits on the scheduler's holder: one root blocker, one held up.
    assert samples[("lockwatch_k8s_root_blockers", (("server", fake.name),))] == 1
    assert (
        samples[("lockwatch_k8s_root_blocker_max_blocked_sessions", (("server", fake.name),))] == 1
    )
    assert samples[("lockwatch_locks", (("source", "k8s"), ("state", "stale")))] == 1
    stale = (("format", "k8s-lease"), ("name", "apps/dead"), ("source", "k8s"))
    assert samples[("lockwatch_lock_stale", stale)] == 1
    free = (("name", "apps/free"), ("server", fake.name))
    assert ("lockwatch_k8s_lease_transitions", free) in samples
    # Nobody renews a free Lease: no unrenewed time, no holder age.
    assert ("lockwatch_k8s_lease_unrenewed_seconds", free) not in samples
    assert ("lockwatch_k8s_lease_holder_age_seconds", free) not in samples


def test_a_recording_keeps_the_leases_facts(
    fake: FakeApi, config: dict[str, str], tmp_path: Path
) -> None:
    from lockwatch.model import codec
    from lockwatch.model.changes import ChangeSet, judge
    from lockwatch.sources.k8s.facts import CandidateFacts, LeaseFacts
    from lockwatch.sources.recording import Recorder, ReplayFeed

    now = datetime.now(UTC)
    lease(fake, "kube-system", "kube-scheduler", "node1_ab", transitions=2)
    spec = {"leaseName": "kube-scheduler", "binaryVersion": "1.34.0", "strategy": "Custom"}
    fake.put("leasecandidates", "kube-system", "ks-node2", spec)
    server = LeaseServer(resolve(config))
    try:
        snapshot = server.poll()
    finally:
        server.close()
    assert snapshot is not None
    entries = judge(to_locks(snapshot), StaticProcesses(), now, "host")
    change = ChangeSet(f"k8s:{fake.name}", now, upserts=tuple(entries))
    path = tmp_path / "incident.rec"
    recorder = Recorder(path, host="host", now=now)
    recorder.write(change)
    recorder.close()
    (line,) = ReplayFeed.open(path)._lines
    back = codec.loads_line(line)
    assert isinstance(back, ChangeSet) and back.upserts == change.upserts
    kinds = {type(entry.lock.facts) for entry in back.upserts}
    assert kinds == {LeaseFacts, CandidateFacts}


def test_why_looks_the_lease_of_a_failed_renewal_up_on_the_cluster(
    fake: FakeApi, config: dict[str, str]
) -> None:
    lease(fake, "kube-system", "kube-scheduler", "node1_ab", renewed=500)
    line = (
        "E1207 14:50:00.777777       1 leaderelection.go:369] failed to renew lease"
        " kube-system/kube-scheduler: timed out waiting for the condition"
    )
    code, out, err = run_cli("why", "--json", line, env=config)
    assert code == 0, err
    document = json.loads(out)
    (found,) = document["locks"]
    assert found["id"] == ids.k8s_id(fake.name, "lease", "kube-system", "kube-scheduler")
    assert found["state"] == "unknown"  # seen once: old by the clock, not yet watched
    assert document["clues"][0]["tool"] == "client-go"


def test_a_namespace_whose_leases_are_forbidden_is_said_and_the_others_read(
    fake: FakeApi, config: dict[str, str]
) -> None:
    fake.deny("list", "leases.coordination.k8s.io", "secret-team")
    lease(fake, "apps", "web", "web-0")
    code, out, err = run_cli(
        "ls", "--k8s-namespace", "apps", "--k8s-namespace", "secret-team", "--json", env=config
    )
    assert code == 1, err  # a partial picture: exit 1, as a server not fully read
    document = json.loads(out)
    assert list(by_name(document)) == ["apps/web"]
    (source,) = document["sources"]
    assert source["status"] == "connected"
    assert (
        "Leases in secret-team unknown: list leases.coordination.k8s.io -n secret-team"
        in (source["reason"])
    )
    assert "secret-team" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("holder", "namespace", "pods", "expected"),
    [
        ("web-0", "apps", {"web-0": ("Running", False)}, ("running", "pod web-0 (Running)")),
        ("web-0", "apps", {"web-0": ("Failed", False)}, ("not-running", "pod web-0 is Failed")),
        ("web-0", "apps", {"web-0": ("Running", True)}, ("not-running", "being deleted")),
        ("web-0", "apps", {}, ("gone", "no pod web-0 in apps")),
        # client-go's components: <hostname>_<uuid>; a pod's hostname is its name.
        ("op-7f9-abc_1b2c", "ops", {"op-7f9-abc": ("Running", False)}, ("running", "op-7f9-abc")),
        # kube-scheduler's static pod is named for its node.
        (
            "cp-1_9f8e",
            "kube-system",
            {"kube-scheduler-cp-1": ("Running", False)},
            ("running", "kube-scheduler-cp-1 on cp-1"),
        ),
        ("node-a", "kube-node-lease", {}, ("", "")),  # a node's heartbeat: no pod to look for
        ("", "apps", {}, ("", "")),
    ],
)
def test_the_holders_pod_is_found_by_the_identities_conventions(
    holder: str,
    namespace: str,
    pods: dict[str, tuple[str, bool]],
    expected: tuple[str, str],
) -> None:
    from lockwatch.sources.k8s.records import holder_pod
    from lockwatch.sources.k8s.server import PodsSeen

    state, detail = holder_pod(holder, namespace, PodsSeen(pods))
    assert state == expected[0] and expected[1] in detail


def test_a_lease_seen_again_unchanged_is_no_change_for_the_dashboard(
    fake: FakeApi, config: dict[str, str]
) -> None:
    from lockwatch.model.changes import judge
    from lockwatch.sources.k8s.plugin import settled

    clock = FrozenClock(datetime.now(UTC))
    lease(fake, "apps", "steady", "steady-0", renewed=0)
    fake.put("pods", "apps", "steady-0", {"phase": "Running"})
    server = LeaseServer(resolve(config), clock=clock)
    try:
        seen = []
        for _ in range(2):
            snapshot = server.poll()
            assert snapshot is not None
            seen.append(judge(to_locks(snapshot), StaticProcesses(), clock.now(), "host")[0])
            clock.advance(2)
        lease(fake, "apps", "steady", "steady-0", renewed=0)  # renewed: a change
        snapshot = server.poll()
        assert snapshot is not None
        renewed = judge(to_locks(snapshot), StaticProcesses(), clock.now(), "host")[0]
    finally:
        server.close()
    assert settled(seen[0], seen[1])
    assert not settled(seen[1], renewed)
