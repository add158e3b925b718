"""Breaking a Lease against the fake API server (fakeapi.py, an imitation: no
kube-apiserver here): holderIdentity cleared by a merge patch carrying the
resourceVersion the operator saw; a renewal in between is a 409, a refusal with
nothing done."""

from __future__ import annotations

import json
from pathlib import Path

from lockwatch.sources.k8s import ids
from tests.conftest import run_cli
from tests.k8s.conftest import lease, listing
from tests.k8s.fakeapi import FakeApi


def test_break_clears_the_holder_of_a_lease_and_is_audited(
    fake: FakeApi, config: dict[str, str], tmp_path: Path
) -> None:
    lease(fake, "apps", "web-leader", "web-5c9-dead", renewed=600, transitions=7)
    seen = fake.objects[("leases", "apps", "web-leader")]["metadata"]["resourceVersion"]
    lock_id = ids.k8s_id(fake.name, "lease", "apps", "web-leader")
    audit = tmp_path / "audit.jsonl"
    # The CLI sees the Lease once: old by the clock is not past due (unknown), so a
    # break needs --force (or its name typed), as for any lock not stale.
    code, out, err = run_cli(
        "break", lock_id, "--reason", "pod gone, INC-7", "--yes", "--audit-log", str(audit),
        env=config,
    )  # fmt: skip
    assert code == 1 and "unknown, not stale" in err and "--force" in err, err
    assert fake.spec("apps", "web-leader")["holderIdentity"] == "web-5c9-dead"
    code, out, err = run_cli(
        "break", lock_id, "--reason", "pod gone, INC-7", "--yes", "--force",
        "--audit-log", str(audit), env=config,
    )  # fmt: skip
    assert code == 0, err
    assert "cleared holderIdentity web-5c9-dead" in out
    spec = fake.spec("apps", "web-leader")
    assert "holderIdentity" not in spec  # cleared; the rest of the record as it was
    assert spec["leaseTransitions"] == 7 and spec["leaseDurationSeconds"] == 15
    (patch,) = [path for method, path in fake.requests if method == "PATCH"]
    assert patch == "/apis/coordination.k8s.io/v1/namespaces/apps/leases/web-leader"
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["event"] for r in records][-2:] == ["action_intent", "lock_broken"]
    done = records[-1]
    assert done["target"]["source"] == "k8s" and done["target"]["lease"] == "web-leader"
    assert done["previous_holder"] == "web-5c9-dead"
    assert done["resource_version_seen"] == seen
    assert "s3cret" not in audit.read_text() and "s3cret" not in out + err
    # Now free: a candidate takes it at once.
    code, out, _ = run_cli("ls", "--k8s", "--json", env=config)
    (now,) = json.loads(out)["locks"]
    assert now["state"] == "free"


def test_a_lease_renewed_under_the_confirmation_is_refused_and_left_alone(
    fake: FakeApi, config: dict[str, str], tmp_path: Path
) -> None:
    from lockwatch.actions.audit import AuditLog, Operator
    from lockwatch.actions.plan import Kind
    from lockwatch.actions.run import Executor
    from lockwatch.actions.targets import find, prepare
    from lockwatch.clock import SystemClock
    from lockwatch.config import Config
    from lockwatch.sources.contract import Wanted
    from lockwatch.sources.k8s.actions import ACTIONS

    lease(fake, "apps", "cas", "cas-0", renewed=600)
    wanted = Wanted((), {"k8s": True}, Config(), config)
    found = find(ids.k8s_id(fake.name, "lease", "apps", "cas"), wanted, "host")
    assert not isinstance(found, str)
    lock, verdict, peers = found
    plan = prepare(Kind.BREAK, lock, verdict, peers=peers)
    assert "only if its resourceVersion is still" in plan.effect
    lease(fake, "apps", "cas", "cas-0", renewed=0)  # the holder renews: a new resourceVersion

    operator = Operator("op", "op", None)
    log = AuditLog(tmp_path / "audit.jsonl", clock=SystemClock(), host="h", operator=operator)
    executor = Executor(log, **ACTIONS.reach(wanted))
    outcome = executor.run(plan, "test", force=True)
    assert not outcome.ok and outcome.code == "changed", outcome.message
    assert "nothing done" in outcome.message
    assert fake.spec("apps", "cas")["holderIdentity"] == "cas-0"

    fake.delete("leases", "apps", "cas")
    outcome = executor.run(plan, "test", force=True)
    assert not outcome.ok and outcome.code == "gone"


def test_a_break_pinned_to_the_lease_ls_showed_refuses_one_renewed_since(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """`--expect-sha256` from `ls --json`: the resourceVersion the operator saw there,
    not the one `break` reads again."""
    lease(fake, "apps", "seen", "seen-0", renewed=600)
    (shown,) = listing(config)["locks"]
    lease(fake, "apps", "seen", "seen-0", renewed=0)  # renewed after the operator looked
    lock_id = ids.k8s_id(fake.name, "lease", "apps", "seen")
    pinned = ("--reason", "x", "--yes", "--force", "--expect-sha256", shown["sha256"])
    code, _, err = run_cli("break", lock_id, *pinned, env=config)
    assert code == 1 and "is not the one you saw" in err and "nothing done" in err
    assert fake.spec("apps", "seen")["holderIdentity"] == "seen-0"
    assert not [method for method, _ in fake.requests if method == "PATCH"]


def test_candidates_and_free_leases_cannot_be_broken(fake: FakeApi, config: dict[str, str]) -> None:
    lease(fake, "apps", "nobody", None)
    code, _, err = run_cli(
        "break", ids.k8s_id(fake.name, "lease", "apps", "nobody"), "--reason", "x", "--yes",
        env=config,
    )  # fmt: skip
    assert code == 1 and "nobody holds Lease apps/nobody" in err


def test_a_lease_whose_holder_identity_is_empty_is_free(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """An empty holderIdentity (what a release writes in some clients, and what the
    API keeps when one is set to "") is no holder, as client-go reads it."""
    fake.put("leases", "apps", "emptied", {"holderIdentity": "", "leaseDurationSeconds": 15})
    (found,) = listing(config)["locks"]
    assert (found["name"], found["state"], found["holder_identity"]) == (
        "apps/emptied",
        "free",
        None,
    )
    assert [reason["code"] for reason in found["reasons"]] == ["k8s_no_holder"]
    code, _, err = run_cli(
        "break", ids.k8s_id(fake.name, "lease", "apps", "emptied"), "--reason", "x", "--yes",
        "--force", env=config,
    )  # fmt: skip
    assert code == 1 and "nobody holds Lease apps/emptied" in err


def test_forbidden_patch_is_a_failure_naming_the_permission(
    fake: FakeApi, config: dict[str, str]
) -> None:
    lease(fake, "apps", "ro", "ro-0", renewed=600)
    fake.deny("patch", "leases.coordination.k8s.io", "apps")
    code, _, err = run_cli(
        "break", ids.k8s_id(fake.name, "lease", "apps", "ro"), "--reason", "x", "--yes",
        "--force", env=config,
    )  # fmt: skip
    assert code != 0
    assert "patch leases.coordination.k8s.io -n apps" in err and "nothing done" in err
    assert fake.spec("apps", "ro")["holderIdentity"] == "ro-0"
