"""The demo's children: the lock files they write decode as the formats they imitate,
their writes are atomic, and as real processes they take, heartbeat, hang, conflict,
queue and release the way the seeds do, and stop when their parent goes.

Documents are checked in-process through the scanner (`scanner.load`) and the model's
verdicts; behaviour is checked by starting the children for real, with short timings,
and waiting (bounded) for what they should do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import SystemClock
from lockwatch.demo import lockfiles as lf
from lockwatch.demo import workspace as ws
from lockwatch.demo.supervisor import Role, Supervisor
from lockwatch.model.assess import assess
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.files.scanner import load, scan
from lockwatch.sources.processes import HostProcesses
from tests.demo.conftest import birth, gone, wait_until

HOST = os.uname().nodename
ME = os.getpid()


def loaded(path: Path) -> Lock:
    lock = load(str(path))
    assert isinstance(lock, Lock), f"{path}: {lock!r}"
    return lock


def judged(root: Path) -> dict[str, Verdict]:
    """Every lock under `root` by name, judged as the dashboard judges it."""
    locks = scan([str(root)]).locks
    return {
        lock.name: verdict for lock, verdict in assess(locks, HostProcesses(), SystemClock(), HOST)
    }


# --------------------------------------------------------------------------- documents


def test_clawdbot_lock_decodes_as_clawdbot(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "memory" / ".lock"
    path.parent.mkdir(parents=True)
    doc = lf.clawdbot_doc(
        pid=ME, session_id="main", acquired_at=lf.utc_now(), hostname=HOST, operation="write:x"
    )
    assert lf.create_exclusive(path, lf.encode(doc))
    lock = loaded(path)
    assert (lock.format, lock.name, lock.defects) == ("clawdbot", "memory", ())
    assert (lock.holder.pid, lock.holder.session, lock.holder.operation) == (ME, "main", "write:x")
    assert judged(tmp_path)["memory"].state is State.ACTIVE


def test_gitclaw_lock_decodes_as_gitclaw_and_an_old_one_is_too_old(tmp_path: Path) -> None:
    locks = tmp_path / ".GITCLAW" / "state" / "locks"
    locks.mkdir(parents=True)
    now = lf.utc_now()
    fresh = lf.gitclaw_doc(issue=42, run_id="12873640211", acquired_at=now, pid=ME)
    old = lf.gitclaw_doc(issue=7, run_id="1", acquired_at=now - timedelta(seconds=750), pid=ME)
    assert lf.create_exclusive(locks / "42.lock", lf.encode(fresh))
    assert lf.create_exclusive(locks / "7.lock", lf.encode(old))
    lock = loaded(locks / "42.lock")
    assert (lock.format, lock.name, lock.holder.session, lock.defects) == (
        "gitclaw",
        "issue-42",
        "12873640211",
        (),
    )
    verdicts = judged(tmp_path)
    assert verdicts["issue-42"].state is State.ACTIVE
    assert verdicts["issue-7"].state is State.STALE and "too_old" in verdicts["issue-7"].codes


def tower(name: str, ttl: int | str = 12) -> lf.Doc:
    now = lf.utc_now()
    return lf.tower_doc(
        lock_name=name,
        request_id="req_0123456789ab",
        actor="claude-code",
        intent="deploy-app",
        intent_version="1.2.0",
        host_id=HOST,
        pid=ME,
        created_at=now,
        heartbeat_at=now,
        ttl_seconds=ttl,
        metadata={"ticket": "OPS-1"},
    )


def test_tower_lock_decodes_as_tower_fleet_v1(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "locks" / "money-tracker-production.lock"
    path.parent.mkdir(parents=True)
    assert lf.create_exclusive(path, lf.encode(tower("money-tracker-production")))
    lock = loaded(path)
    assert (lock.format, lock.name, lock.ttl_seconds, lock.defects) == (
        "tower-fleet/v1",
        "money-tracker-production",
        12.0,
        (),
    )
    assert lock.holder.operation == "deploy-app@1.2.0"
    assert judged(tmp_path)["money-tracker-production"].state is State.ACTIVE


def test_a_ttl_written_as_a_string_is_a_schema_violation(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "locks" / "nightly-backup.lock"
    path.parent.mkdir(parents=True)
    assert lf.create_exclusive(path, lf.encode(tower("nightly-backup", ttl="30")))
    lock = loaded(path)
    assert lock.format == "tower-fleet/v1"
    assert [reason.code for reason in lock.defects] == ["schema_violation"]
    assert judged(tmp_path)["nightly-backup"].state is State.INVALID


def test_loops_locks_decode_and_overlapping_scopes_conflict(tmp_path: Path) -> None:
    running = tmp_path / ".loops" / ".running"
    running.mkdir(parents=True)
    for name, scope in (("fix-bugs", "src"), ("refactor-api", "src/api"), ("docs", "docs")):
        doc = lf.loops_doc(
            loop_name=name, scope=[str(tmp_path / scope)], pid=ME, started_at=lf.utc_now()
        )
        assert lf.create_exclusive(running / f"{name}.lock", lf.encode(doc, indent=None))
    lock = loaded(running / "fix-bugs.lock")
    assert (lock.format, lock.scope, lock.defects) == ("little-loops", (str(tmp_path / "src"),), ())
    verdicts = judged(tmp_path)
    assert "scope_conflict" in verdicts["fix-bugs"].codes
    assert "scope_conflict" in verdicts["refactor-api"].codes
    assert "scope_conflict" not in verdicts["docs"].codes


# --------------------------------------------------------------------------- atomic writes


def test_exclusive_creation_refuses_a_held_lock_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    assert lf.create_exclusive(path, b"first")
    assert not lf.create_exclusive(path, b"second")
    assert path.read_bytes() == b"first"
    lf.replace_atomic(path, b"third", tag="heartbeat")
    assert path.read_bytes() == b"third"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.lock"]


def test_release_removes_only_ones_own_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    path.write_text(json.dumps({"request_id": "req_theirs"}))
    assert not lf.remove_if(path, lambda doc: doc.get("request_id") == "req_mine")
    assert path.exists()
    assert lf.remove_if(path, lambda doc: doc.get("request_id") == "req_theirs")
    assert not path.exists()
    assert not lf.remove_if(path, lambda doc: True)  # already gone: nothing to do


# --------------------------------------------------------------------------- real children


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    workspace = ws.create(tmp_path)
    sup = Supervisor(workspace)
    try:
        yield sup
    finally:
        assert sup.stop() == []


def log_of(sup: Supervisor, name: str) -> str:
    path = sup.workspace.logs / f"{name}.log"
    return path.read_text() if path.exists() else ""


def test_an_executor_heartbeats_releases_on_sigterm_and_a_hung_one_goes_stale(
    supervisor: Supervisor,
) -> None:
    locks = supervisor.workspace.tower_locks
    common = ("--locks", str(locks), "--intent", "sync", "--run", "inf")
    supervisor.start(Role("healthy", "tower", ("--name", "healthy", *common, "--ttl", "4"), ""))
    hung = ("--name", "hung", *common, "--ttl", "1", "--hang-after", "0.3")
    supervisor.start(Role("hung", "tower", hung, ""))
    healthy, hung_lock = locks / "healthy.lock", locks / "hung.lock"
    wait_until(lambda: healthy.exists() and hung_lock.exists(), "both executors to lock")
    first = lf.read_doc(healthy)
    assert first is not None and first["created_at"] == first["last_heartbeat_at"]
    wait_until(
        lambda: (lf.read_doc(healthy) or {}).get("last_heartbeat_at") != first["last_heartbeat_at"],
        "a heartbeat",
    )
    assert (lf.read_doc(healthy) or {}).get("request_id") == first["request_id"]

    def hung_is_stale() -> bool:
        verdict = judged(locks).get("hung")
        return verdict is not None and "heartbeat_expired" in verdict.codes

    wait_until(hung_is_stale, "the hung executor's lock to go stale")
    assert judged(locks)["healthy"].state is State.ACTIVE
    assert "hung: no more heartbeats" in log_of(supervisor, "hung")

    assert supervisor.stop() == []
    assert not healthy.exists(), "a stopped executor releases its lock"
    assert hung_lock.exists(), "a hung executor cleans nothing up"


def test_racing_loops_conflict_and_a_queued_loop_waits_its_turn(supervisor: Supervisor) -> None:
    project = supervisor.workspace.loops_project
    running = project / ".loops" / ".running"
    base = ("--project", str(project))
    for name, scope in (("fix-bugs", "src"), ("refactor-api", "src/api")):
        args = (*base, "--name", name, "--scope", scope, "--run", "inf", "--racy-start")
        supervisor.start(Role(name, "loops", args, ""))
    # docs runs until docs-api has queued behind it, then finishes (SIGTERM: it lets
    # go of its lock), however late a loaded machine started docs-api.
    docs = supervisor.start(
        Role("docs", "loops", (*base, "--name", "docs", "--scope", "docs", "--run", "inf"), "")
    )
    wait_until(lambda: (running / "docs.lock").exists(), "docs to start")
    queued = (*base, "--name", "docs-api", "--scope", "docs/api", "--queue", "--run", "inf")
    supervisor.start(Role("docs-api", "loops", queued, ""))
    wait_until(lambda: "Waiting for conflicting loop 'docs'" in log_of(supervisor, "docs-api"),
               "docs-api to queue behind docs")  # fmt: skip
    assert not (running / "docs-api.lock").exists()
    docs.process.send_signal(signal.SIGTERM)
    wait_until(lambda: "loop docs finished" in log_of(supervisor, "docs"), "docs to finish")
    wait_until(lambda: (running / "docs-api.lock").exists(), "docs-api to take its turn")

    verdicts = judged(project)
    assert "scope_conflict" in verdicts["fix-bugs"].codes
    assert "scope_conflict" in verdicts["refactor-api"].codes
    assert "scope_conflict" not in verdicts["docs-api"].codes


def test_issue_runs_take_turns_and_a_cancelled_run_leaves_a_stale_lock(
    supervisor: Supervisor,
) -> None:
    locks = supervisor.workspace.gitclaw_locks("runner")
    run = ("--locks", str(locks), "--issue", "42", "--hold", "inf")
    supervisor.start(Role("run-a", "gitclaw", run, ""))
    wait_until(lambda: (locks / "42.lock").exists(), "a run to take issue 42")
    supervisor.start(Role("run-b", "gitclaw", (*run, "--pause", "inf"), ""))
    wait_until(lambda: "is being processed by run" in log_of(supervisor, "run-b"),
               "the second run to skip issue 42")  # fmt: skip
    old = ("--locks", str(locks), "--issue", "7", "--cancelled-ago", "750")
    cancelled = supervisor.start(Role("run-7", "gitclaw", old, ""))
    assert cancelled.process.wait(10) == 0
    verdicts = judged(locks)
    assert verdicts["issue-42"].state is State.ACTIVE
    assert verdicts["issue-7"].state is State.STALE and "too_old" in verdicts["issue-7"].codes


def listed(root: Path) -> dict[str, Any]:
    """`lockwatch ls --json ROOT` as a user runs it (kernel evidence and all), by
    name; no config or LOCKWATCH_* variable of the caller's adds anything."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCKWATCH_", "PG"))}
    env["XDG_CONFIG_HOME"] = str(root / "no-config")
    out = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return {lock["path"].rsplit("/", 1)[-1]: lock for lock in json.loads(out.stdout)["locks"]}


def test_a_build_holds_its_sentinel_with_flock_and_lets_it_go(
    supervisor: Supervisor,
) -> None:
    builds = supervisor.workspace.builds
    held, done = builds / "held.lock", builds / "done.lock"
    holding = supervisor.start(Role("holding", "flock", ("--lock", str(held), "--hold", "inf"), ""))
    supervisor.start(
        Role("done", "flock", ("--lock", str(done), "--hold", "0.2", "--pause", "inf"), "")
    )
    wait_until(lambda: "released done.lock" in log_of(supervisor, "done"), "a build to end")
    wait_until(lambda: "holds held.lock" in log_of(supervisor, "holding"), "a build to start")
    locks = listed(builds)
    assert held.read_bytes() == b"" and done.read_bytes() == b""  # the file says nothing
    assert locks["held.lock"]["state"] == "active", locks["held.lock"]
    assert locks["held.lock"]["holder"]["pid"] == holding.process.pid
    # Released: nobody holds a kernel lock on it or has it open, and a one-shot ls
    # never saw one held: a sentinel and an existence lock (npm's lockfile) alike,
    # unknown, never free (issue 33, item 3; the dashboard, which saw it, says free).
    assert locks["done.lock"]["state"] == "unknown", locks["done.lock"]
    assert supervisor.stop() == []
    assert listed(builds)["held.lock"]["state"] == "unknown"


def test_memory_writers_back_off_and_break_a_dead_holders_lock(supervisor: Supervisor) -> None:
    memory = supervisor.workspace.memory("main")
    memory.mkdir(parents=True)
    lock = memory / ".lock"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    doc = lf.clawdbot_doc(
        pid=int(dead.stdout), session_id="gone", acquired_at=lf.utc_now(), hostname=HOST,
        operation="write:tasks.json",
    )  # fmt: skip
    assert lf.create_exclusive(lock, lf.encode(doc))
    args = ("--memory", str(memory), "--hold", "0.2", "--pause", "0.1")
    supervisor.start(Role("a", "clawdbot", (*args, "--session", "a"), ""))
    supervisor.start(Role("b", "clawdbot", (*args, "--session", "b"), ""))

    def logs() -> str:
        return log_of(supervisor, "a") + log_of(supervisor, "b")

    wait_until(lambda: "Breaking stale lock: process" in logs(), "the dead lock to be broken")
    wait_until(lambda: " tries (" in logs(), "a writer to back off, then get the lock")
    assert supervisor.stop() == []
    assert not lock.exists()


def test_children_stop_when_their_parent_dies(tmp_path: Path) -> None:
    """A parent that dies without a word (SIGKILL) leaves no child behind."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from lockwatch.demo import workspace
        from lockwatch.demo.supervisor import Role, Supervisor
        sup = Supervisor(workspace.create(Path({str(tmp_path)!r})))
        child = sup.start(Role("x", "tower", ("--locks", str(sup.workspace.tower_locks),
                                             "--name", "x", "--intent", "i", "--run", "inf"), ""))
        print(child.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        created = birth(pid)
        wait_until(lambda: any(tmp_path.glob("lockwatch-demo-*/systems/**/x.lock")),
                   "the child to take its lock")  # fmt: skip
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
    wait_until(lambda: gone(pid, created), "the orphaned child to stop", timeout=5)
