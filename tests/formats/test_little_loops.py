"""little-loops' real layout, with the real `ll-loop run` (PyPI `little-loops`).

Each `ll-loop` runs a loop whose one shell step records its own pid in a marker
file and then polls for a release file: the marker appearing means the runner took
its scope lock (the step runs only after LockManager.acquire); a release file
ends the step. The marker's pid is the step's shell, which the test kills on
teardown (ll-loop starts steps in their own session, so they outlive a SIGKILLed
runner).

The tool's own answers come from fresh processes: LockManager(...).find_conflict
(what the next `ll-loop run` asks; it also deletes locks whose pid is dead) and
`ll-loop queue list --json` (which prunes queue entries whose waiter is dead).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.assess import assess
from lockwatch.model.lock import Holder
from lockwatch.model.process import ProcessFacts, StaticProcesses
from lockwatch.model.verdict import State
from lockwatch.sources.files.decoders import decode_file, little_loops, loops_queue
from lockwatch.sources.files.facts import facts_of, refiled
from tests.conftest import LOCAL_HOST, NOW, ago, lock_file
from tests.formats.common import by_name, codes, lockwatch_ls, ls_document, wait_until

LL_LOOP = Path(sys.executable).parent / "ll-loop"
pytestmark = pytest.mark.skipif(not LL_LOOP.exists(), reason="little-loops is not installed")

WAIT_SECONDS = 30.0
STEP_SECONDS = 120  # the held step; the test always ends it far sooner
INSTANCE = re.compile(r"^(?P<loop>.+)-\d{8}T\d{6}$")


def wait_for(what: str, check: Callable[[], object], timeout: float = WAIT_SECONDS) -> None:
    wait_until(what, check, timeout=timeout, interval=0.05)


@dataclass
class Project:
    """A little-loops project: `<root>/.loops/*.yaml`, `src/`, `src/sub/`."""

    root: Path
    home: Path
    runners: list[subprocess.Popen[bytes]] = field(default_factory=list)
    steps: list[Path] = field(default_factory=list)
    others: list[int] = field(default_factory=list)  # pids started indirectly

    @property
    def running(self) -> Path:
        return self.root / ".loops" / ".running"

    @property
    def queue(self) -> Path:
        return self.root / ".loops" / ".queue"

    def loop(self, name: str, scope: str, action: str | None = None) -> Path:
        """A one-step loop; by default the step marks `<name>.ready` and sleeps."""
        marker = self.root / f"{name}.ready"
        if action is None:
            release = self.root / f"{name}.release"
            action = (
                f"echo $$ > {marker}; for i in $(seq {STEP_SECONDS * 10}); do"
                f" [ -e {release} ] && exit 0; sleep 0.1; done"
            )
            self.steps.append(marker)
        (self.root / ".loops" / f"{name}.yaml").write_text(
            f"name: {name}\n"
            f"description: lockwatch test loop\n"
            f"initial: work\n"
            f'scope: ["{scope}"]\n'
            f"states:\n"
            f"  work: {{action: {json.dumps(action)}, action_type: shell, next: done}}\n"
            f"  done: {{terminal: true}}\n"
        )
        return marker

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LL_", "LITTLE_LOOPS"))}
        env["HOME"] = str(self.home)
        return env

    def start(self, name: str, *flags: str) -> subprocess.Popen[bytes]:
        runner = subprocess.Popen(
            [str(LL_LOOP), "run", name, *flags],
            cwd=self.root,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.runners.append(runner)
        return runner

    def hold(self, name: str, *flags: str) -> subprocess.Popen[bytes]:
        """`ll-loop run name` with its step under way (its scope lock taken)."""
        runner = self.start(name, *flags)
        marker = self.root / f"{name}.ready"
        wait_for(f"{name}'s step", lambda: marker.exists() and marker.read_text().strip() != "")
        return runner

    def end_step(self, name: str) -> None:
        (self.root / f"{name}.release").touch()

    def ll_loop(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(LL_LOOP), *args],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=WAIT_SECONDS,
        )

    def conflict(self, scope: str) -> str | None:
        """What the next `ll-loop run` on `scope` would collide with (a fresh process)."""
        code = (
            "import sys; from pathlib import Path\n"
            "from little_loops.fsm.concurrency import LockManager\n"
            "found = LockManager(Path('.loops')).find_conflict([sys.argv[1]])\n"
            "print(found.loop_name if found else '')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(self.root / scope)],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=WAIT_SECONDS,
            check=True,
        )
        return done.stdout.strip() or None

    def ls(self) -> dict[str, dict[str, Any]]:
        """`lockwatch ls --json` as a user runs it: records by file name."""
        done = lockwatch_ls(self.root, self.home, timeout=WAIT_SECONDS)
        assert "Traceback" not in done.stderr, done.stderr
        records = ls_document(done)["locks"]
        return by_name(r for r in records if "/.loops/" in r["path"])

    def instance(self, runner: subprocess.Popen[bytes]) -> str:
        """The instance id of the run `runner` is: its pid file's stem."""
        for pid_file in self.running.glob("*.pid"):
            if pid_file.read_text().strip() == str(runner.pid):
                return pid_file.stem
        raise AssertionError(f"no pid file names runner {runner.pid}")

    def teardown(self) -> None:
        pids = [*self.others]
        for marker in self.steps:
            text = marker.read_text().strip() if marker.exists() else ""
            if text.isdigit():
                pids.append(int(text))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for runner in self.runners:
            if runner.poll() is None:
                runner.kill()
            runner.wait(timeout=WAIT_SECONDS)
            if runner.stdout is not None:
                runner.stdout.close()


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    root = tmp_path / "proj"
    (root / ".loops").mkdir(parents=True)
    (root / "src" / "sub").mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    made = Project(root.resolve(), home)
    try:
        yield made
    finally:
        made.teardown()


# --- held, released, killed -----------------------------------------------------------


def test_held_run_lock_pid_file_and_sentinel(project: Project) -> None:
    project.loop("sleeper", "src/")
    runner = project.hold("sleeper")
    instance = project.instance(runner)
    matched = INSTANCE.match(instance)
    assert matched is not None and matched["loop"] == "sleeper"

    records = project.ls()
    lock = records[f"{instance}.lock"]
    assert (lock["format"], lock["state"], codes(lock)) == ("little-loops", "active", [])
    assert lock["name"] == instance
    assert lock["holder"]["pid"] == runner.pid
    assert lock["holder"]["session"] == instance
    assert lock["holder"]["operation"] == "loop sleeper"
    assert lock["holder"]["alive"] is True
    assert lock["scope"] == [str(project.root / "src")]
    assert lock["conflicts_with"] == []

    pid_file = records[f"{instance}.pid"]
    assert (pid_file["format"], pid_file["state"], codes(pid_file)) == (
        "little-loops",
        "active",
        [],
    )
    assert (pid_file["name"], pid_file["holder"]["pid"]) == (instance, runner.pid)

    # The sentinel is flock'ed only around check-then-create: free now, never invalid.
    sentinel = records[".acquire.lock"]
    assert (sentinel["format"], sentinel["state"], codes(sentinel)) == (
        "little-loops",
        "free",
        ["not_held"],
    )
    # Nothing else under .running/ (state, events, log) is listed as a lock.
    assert set(records) == {f"{instance}.lock", f"{instance}.pid", ".acquire.lock"}

    assert project.conflict("src/sub") == "sleeper"  # ll-loop agrees: held


def test_released_when_the_run_ends(project: Project) -> None:
    project.loop("sleeper", "src/")
    runner = project.hold("sleeper")
    project.end_step("sleeper")
    assert runner.wait(timeout=WAIT_SECONDS) == 0

    records = project.ls()
    assert set(records) == {".acquire.lock"}
    assert records[".acquire.lock"]["state"] == "free"
    assert project.conflict("src") is None


def test_sigkilled_runner_leaves_stale_lock_and_pid_file(project: Project) -> None:
    project.loop("sleeper", "src/")
    runner = project.hold("sleeper")
    instance = project.instance(runner)
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=WAIT_SECONDS)

    records = project.ls()
    for name in (f"{instance}.lock", f"{instance}.pid"):
        record = records[name]
        assert (record["state"], codes(record)) == ("stale", ["holder_dead"]), name
        assert record["holder"]["pid"] == runner.pid
        assert record["holder"]["alive"] is False
    assert records[".acquire.lock"]["state"] == "free"

    # ll-loop's next acquire deems it stale too: no conflict, and it deletes the lock
    # (the pid file, cleaned by atexit only, stays behind).
    assert project.conflict("src") is None
    assert not (project.running / f"{instance}.lock").exists()
    assert (project.running / f"{instance}.pid").exists()


def test_sentinel_held_with_flock_is_active(project: Project) -> None:
    project.loop("sleeper", "src/")
    project.hold("sleeper")
    # LockManager.acquire's own critical section, step for step (open "w", blocking
    # LOCK_EX), held here so that lockwatch looks while it is taken.
    with open(project.running / ".acquire.lock", "w") as sentinel:
        fcntl.flock(sentinel, fcntl.LOCK_EX)
        record = project.ls()[".acquire.lock"]
        assert (record["state"], codes(record)) == ("active", ["kernel_lock"])
    assert project.ls()[".acquire.lock"]["state"] == "free"


# --- foreign host -----------------------------------------------------------------------


@pytest.mark.parametrize("holder_lives", [True, False])
def test_lock_from_another_host_is_judged_by_the_local_pid_as_ll_loop_does(
    project: Project, holder_lives: bool
) -> None:
    # A byte-for-byte imitation of a lock another host's `ll-loop run` wrote into a
    # shared project (json.dump of ScopeLock.to_dict(), UTC isoformat, resolved
    # scope): the format records no host, so neither ll-loop nor lockwatch can tell it
    # from a local one, and ll-loop's find_conflict checks its pid here.
    sleeper = subprocess.Popen(["sleep", str(STEP_SECONDS)])
    project.others.append(sleeper.pid)
    pid = sleeper.pid
    if not holder_lives:
        sleeper.kill()
        sleeper.wait(timeout=WAIT_SECONDS)
    project.running.mkdir(parents=True)
    instance = "sleeper-20261124T025724"
    # Stamped as acquire() does (datetime.now(UTC).isoformat()), after the pid's
    # process started: an older stamp would make lockwatch call that pid recycled.
    (project.running / f"{instance}.lock").write_text(
        json.dumps(
            {
                "loop_name": "sleeper",
                "scope": [str(project.root / "src")],
                "pid": pid,
                "started_at": datetime.now(UTC).isoformat(),
            }
        )
    )
    record = project.ls()[f"{instance}.lock"]
    if holder_lives:
        assert (record["state"], codes(record)) == ("active", [])
        assert project.conflict("src") == "sleeper"
    else:
        assert (record["state"], codes(record)) == ("stale", ["holder_dead"])
        assert project.conflict("src") is None
    sleeper.kill()
    sleeper.wait(timeout=WAIT_SECONDS)


# --- queue ------------------------------------------------------------------------------


def test_queued_run_is_waiting_blocked_by_the_holder(project: Project) -> None:
    project.loop("sleeper", "src/")
    project.loop("waiter", "src/sub")
    holder = project.hold("sleeper")
    holder_instance = project.instance(holder)
    waiter = project.start("waiter", "--queue", "--queue-timeout", str(STEP_SECONDS))
    wait_for("the queue entry", lambda: any(project.queue.glob("*.json")))
    (entry_path,) = project.queue.glob("*.json")
    entry_id = entry_path.stem

    records = project.ls()
    entry = records[entry_path.name]
    assert (entry["format"], entry["state"], codes(entry)) == (
        "little-loops-queue",
        "waiting",
        ["waiting", "blocked_by"],
    )
    assert entry["name"] == "waiter"
    assert entry["holder"]["pid"] == waiter.pid
    assert entry["holder"]["session"] == entry_id
    assert entry["holder"]["operation"] == "loop waiter, queued behind loop sleeper"
    blocked = entry["reasons"][1]["message"]
    assert blocked == f"blocked by loop sleeper (its scope {project.root / 'src'})"
    # The queued run has its pid file already, but no scope lock.
    waiter_instance = project.instance(waiter)
    assert records[f"{waiter_instance}.pid"]["state"] == "active"
    assert f"{waiter_instance}.lock" not in records
    assert records[f"{holder_instance}.lock"]["state"] == "active"
    listed = json.loads(project.ll_loop("queue", "list", "--json").stdout)
    assert [item["id"] for item in listed] == [entry_id]

    # The waiter dies without its atexit cleanup: the entry stays, for a dead pid.
    waiter.send_signal(signal.SIGKILL)
    waiter.wait(timeout=WAIT_SECONDS)
    entry = project.ls()[entry_path.name]
    assert (entry["state"], codes(entry)) == ("stale", ["holder_dead", "blocked_by"])
    # ll-loop's own reading prunes it as dead.
    assert json.loads(project.ll_loop("queue", "list", "--json").stdout) == []
    assert not entry_path.exists()


# --- nesting and scope conflicts --------------------------------------------------------


def test_loop_started_by_a_loop_is_no_scope_conflict(project: Project) -> None:
    project.loop("inner", "src/sub")
    project.loop("outer", "src/", action=f"{LL_LOOP} run inner")
    project.loop("rival", "src/")
    outer = project.start("outer")
    inner_marker = project.root / "inner.ready"
    project.steps.append(inner_marker)
    wait_for("the inner loop's step", lambda: inner_marker.exists() and inner_marker.read_text())
    outer_instance = project.instance(outer)
    (inner_lock,) = [p for p in project.running.glob("inner-*.lock") if INSTANCE.match(p.stem)]
    inner_pid = json.loads(inner_lock.read_text())["pid"]
    project.others.append(inner_pid)

    records = project.ls()
    for name in (f"{outer_instance}.lock", inner_lock.name):
        assert (records[name]["state"], codes(records[name])) == ("active", []), name
        assert records[name]["conflicts_with"] == []

    # An unrelated run on the same scope: ll-loop refuses it.
    refused = project.ll_loop("run", "rival")
    assert refused.returncode == 1
    assert "Scope conflict with running loop" in refused.stdout + refused.stderr
    assert not list(project.running.glob("rival-*.lock"))

    # So the unrelated overlap is built byte-for-byte as ll-loop would have written
    # it, held by a live process that is neither loop's ancestor nor descendant.
    rival = subprocess.Popen(["sleep", str(STEP_SECONDS)])
    project.others.append(rival.pid)
    rival_lock = project.running / "rival-20261124T025724.lock"
    rival_lock.write_text(
        json.dumps(
            {
                "loop_name": "rival",
                "scope": [str(project.root / "src")],
                "pid": rival.pid,
                "started_at": datetime.now(UTC).isoformat(),
            }
        )
    )
    try:
        records = project.ls()
        rival_record = records[rival_lock.name]
        outer_record = records[f"{outer_instance}.lock"]
        inner_record = records[inner_lock.name]
        assert codes(rival_record) == ["scope_conflict"]
        assert sorted(rival_record["conflicts_with"]) == sorted(
            [outer_record["id"], inner_record["id"]]
        )
        assert codes(outer_record) == codes(inner_record) == ["scope_conflict"]
        assert (
            outer_record["conflicts_with"] == inner_record["conflicts_with"] == [rival_record["id"]]
        )
    finally:
        rival.kill()
        rival.wait(timeout=WAIT_SECONDS)


# --- bad input --------------------------------------------------------------------------


BAD_FILES: list[tuple[str, str, bytes, str, str, list[str]]] = [
    # (directory, file, bytes, format, state, codes)
    (".running", "x-20261124T025724.lock", b'{"loop_name": "x", "scope": ["/p/s', "little-loops",
     "invalid", ["unparseable"]),
    (".running", "x-20261124T025724.lock", b"\x00\xff", "little-loops", "invalid", ["unparseable"]),
    (".running", "x-20261124T025724.lock", b"", "little-loops", "invalid", ["unparseable"]),
    (".running", "x-20261124T025724.pid", b"", "little-loops", "invalid", ["unparseable"]),
    (".running", "x-20261124T025724.pid", b"12ab", "little-loops", "invalid", ["unparseable"]),
    (".running", "x-20261124T025724.pid", b"\xff\xfe", "little-loops", "invalid", ["unparseable"]),
    (".running", ".acquire.lock", b"\x00garbage", "little-loops", "free", ["not_held"]),
    (".queue", "3f0c.json", b'{\n  "id": "3f0c', "little-loops-queue", "invalid", ["unparseable"]),
    (".queue", "3f0c.json", b"[1, 2]", "little-loops-queue", "invalid", ["schema_violation"]),
    (".queue", "3f0c.json", b'{"id": "3f0c", "loopName": "x", "enqueuedAt": '
     b'"2026-11-24T02:57:59+00:00", "context": {"waitingFor": "y"}}', "little-loops-queue",
     "invalid", ["schema_violation", "blocked_by"]),
]  # fmt: skip


@pytest.mark.parametrize(("where", "name", "raw", "fmt", "state", "want"), BAD_FILES)
def test_bad_files_never_crash(
    project: Project, where: str, name: str, raw: bytes, fmt: str, state: str, want: list[str]
) -> None:
    directory = project.root / ".loops" / where
    directory.mkdir(parents=True)
    (directory / name).write_bytes(raw)
    record = project.ls()[name]
    assert (record["format"], record["state"], codes(record)) == (fmt, state, want)


def test_bad_lock_is_skipped_by_ll_loop(project: Project) -> None:
    # ll-loop's own reading of a truncated lock: skipped, neither held nor removed.
    project.running.mkdir(parents=True)
    bad = project.running / "x-20261124T025724.lock"
    bad.write_bytes(b'{"loop_name": "x", "scope": ["')
    assert project.conflict("src") is None
    assert bad.exists()


# --- pure: decoding and the ancestry rule ---------------------------------------------

ROOT = "/home/dev/proj"
RUNNING = f"{ROOT}/.loops/.running"
REAL_LOCK = (
    '{"loop_name": "sleeper", "scope": ["/home/dev/proj/src"], "pid": 15621,'
    ' "started_at": "2026-11-24T02:57:24.198325+00:00"}'
)
REAL_QUEUE = """{
  "id": "9302cdbb-f05b-4385-8cb2-8c135dd24216",
  "loopName": "sleeper",
  "enqueuedAt": "2026-11-24T02:57:59.652918+00:00",
  "context": {
    "waitingFor": "inner",
    "scope": [
      "/home/dev/proj/src/sub"
    ],
    "pid": 16297
  }
}"""


def test_real_lock_names_the_instance() -> None:
    lock = decode_file(lock_file(f"{RUNNING}/sleeper-20261124T025724.lock", REAL_LOCK))
    assert (lock.format, lock.name) == ("little-loops", "sleeper-20261124T025724")
    assert lock.holder == Holder(
        pid=15621, session="sleeper-20261124T025724", operation="loop sleeper"
    )
    # A loop name with dashes and digits: only ll-loop's exact suffix is stripped.
    doc = json.loads(REAL_LOCK) | {"loop_name": "fix-2-bugs"}
    other = decode_file(lock_file(f"{RUNNING}/fix-2-bugs-20261124T025724.lock", doc))
    assert other.name == "fix-2-bugs-20261124T025724"
    assert decode_file(lock_file(f"{RUNNING}/sleeper-20261124T025724.lock", doc)).name == (
        "fix-2-bugs"
    )


def test_pid_file_and_sentinel_decode() -> None:
    pid = decode_file(lock_file(f"{RUNNING}/sleeper-20261124T025724.pid", "15621"))
    assert (pid.format, facts_of(pid).policy, pid.defects) == (
        "little-loops",
        little_loops.PID_FILE,
        (),
    )
    assert pid.holder.pid == 15621
    sentinel = decode_file(lock_file(f"{RUNNING}/.acquire.lock", b""))
    assert (facts_of(sentinel).policy, sentinel.defects) == (little_loops.SENTINEL, ())
    # Outside .loops/.running the same files are nobody's in particular.
    assert decode_file(lock_file("/tmp/x/sleeper.pid", "15621")).format == "generic"


def test_queue_entry_decodes_every_field() -> None:
    path = f"{ROOT}/.loops/.queue/9302cdbb-f05b-4385-8cb2-8c135dd24216.json"
    assert loops_queue.wants(path, "file")
    assert not loops_queue.wants(path, "dir")
    assert not loops_queue.wants(f"{ROOT}/.loops/.running/x.json", "file")
    entry = decode_file(lock_file(path, REAL_QUEUE))
    assert (entry.format, entry.name, facts_of(entry).policy) == (
        "little-loops-queue",
        "sleeper",
        loops_queue.POLICY,
    )
    assert entry.holder.pid == 16297
    assert entry.scope == ()  # the blocker's scope, not the waiter's: only in the note
    queued_at = datetime(2026, 11, 24, 2, 57, 59, 652918, tzinfo=UTC)
    assert entry.acquired_at == queued_at
    later = FrozenClock(queued_at + timedelta(minutes=5))
    waiter = StaticProcesses(ProcessFacts(16297, True, queued_at - timedelta(seconds=2)))
    waiting = assess([entry], waiter, later, LOCAL_HOST)[0][1]
    assert (waiting.state, waiting.codes) == (State.WAITING, ("waiting", "blocked_by"))
    assert waiting.reasons[1].message == "blocked by loop inner (its scope /home/dev/proj/src/sub)"
    gone = assess([entry], StaticProcesses(), later, LOCAL_HOST)[0][1]
    assert (gone.state, gone.codes) == (State.STALE, ("holder_dead", "blocked_by"))
    # A pid that started after the entry was written is not the waiter (ll-loop's
    # `queue remove` refuses to signal it for that very reason).
    recycled = ProcessFacts(16297, True, queued_at + timedelta(seconds=30))
    reused = assess([entry], StaticProcesses(recycled), later, LOCAL_HOST)[0][1]
    assert (reused.state, reused.codes) == (State.STALE, ("pid_reused", "blocked_by"))


def _scope_lock(name: str, pid: int, scope: str) -> Any:
    doc = {"loop_name": name, "scope": [scope], "pid": pid, "started_at": ago(10.0).isoformat()}
    return decode_file(lock_file(f"{RUNNING}/{name}-20261124T025724.lock", doc))


@pytest.mark.parametrize(
    ("inner_ancestors", "conflict"),
    [((30, 20, 1), False), ((31, 1), True), ((), True)],
)
def test_ancestry_decides_scope_conflict(inner_ancestors: tuple[int, ...], conflict: bool) -> None:
    outer = _scope_lock("outer", 20, f"{ROOT}/src")
    inner = _scope_lock("inner", 40, f"{ROOT}/src/sub")
    processes = StaticProcesses(
        ProcessFacts(20, True, ago(60.0), ancestors=(1,)),
        ProcessFacts(40, True, ago(30.0), ancestors=inner_ancestors),
    )
    judged = assess([outer, inner], processes, FrozenClock(NOW), LOCAL_HOST)
    for _, verdict in judged:
        assert (verdict.codes == ("scope_conflict",)) is conflict


def _singleton_lock(name: str, instance: str, pid: int, scope: str) -> Any:
    # Byte-for-byte what ScopeLock.to_dict() writes for a `singleton: true` loop.
    doc = {
        "loop_name": name,
        "scope": [scope],
        "pid": pid,
        "started_at": ago(10.0).isoformat(),
        "singleton": True,
    }
    return decode_file(lock_file(f"{RUNNING}/{instance}.lock", doc))


@pytest.mark.parametrize(
    ("second_singleton", "inner_ancestors", "conflict"),
    [(True, (1,), True), (False, (1,), False), (True, (20, 1), False)],
)
def test_two_runs_of_a_singleton_loop_conflict_whatever_their_scopes(
    second_singleton: bool, inner_ancestors: tuple[int, ...], conflict: bool
) -> None:
    # find_conflict's singleton predicate: same loop_name, both singleton, not an
    # ancestor — a conflict even though the scopes are disjoint.
    first = _singleton_lock("autodev", "autodev-20261124T025724", 20, f"{ROOT}/a")
    second = _singleton_lock("autodev", "autodev-20261124T025801", 40, f"{ROOT}/b")
    if not second_singleton:
        second = refiled(second, {"singleton_name": None})
    processes = StaticProcesses(
        ProcessFacts(20, True, ago(60.0), ancestors=(1,)),
        ProcessFacts(40, True, ago(30.0), ancestors=inner_ancestors),
    )
    judged = assess([first, second], processes, FrozenClock(NOW), LOCAL_HOST)
    assert facts_of(first).singleton_name == "autodev"
    for _, verdict in judged:
        assert (verdict.codes == ("scope_conflict",)) is conflict
    if conflict:
        assert "singleton loop autodev" in judged[0][1].reasons[0].message
        assert judged[0][1].conflicts_with == (second.id,)


def test_the_library_agrees_that_a_live_singleton_run_blocks_its_name(tmp_path: Path) -> None:
    from little_loops.fsm.concurrency import LockManager

    manager = LockManager(tmp_path / ".loops")
    assert manager.acquire("autodev", [str(tmp_path / "a")], singleton=True)
    (held,) = (tmp_path / ".loops" / ".running").glob("autodev*.lock")
    assert (
        facts_of(decode_file(lock_file(str(held), held.read_bytes()))).singleton_name == "autodev"
    )
    conflict = manager.find_conflict(
        [str(tmp_path / "b")], caller_loop_name="autodev", caller_singleton=True
    )
    assert conflict is not None and conflict.singleton
