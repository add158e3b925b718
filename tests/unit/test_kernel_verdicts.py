"""The kernel's word in verdicts: held lock files are active whoever the file
names, sentinels nobody holds are free (or active when a live process has them
open), pid files that carried a kernel lock follow it, and /proc/locks records
are held or waiting. Kernel facts here are built by hand (pure model tests);
tests/kernel checks them against real locks."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.process import ProcessFacts, StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources import registry
from lockwatch.sources.filelocks import FileKey, KernelEvidence, KernelLock
from lockwatch.sources.files.decoders import generic
from lockwatch.sources.files.evidence import with_evidence
from lockwatch.sources.files.facts import FileFacts, refiled
from lockwatch.sources.files.ids import file_id, file_path
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.kernel.ids import KernelId, kernel_id, kernel_lock_id, parse_kernel
from lockwatch.sources.postgres.ids import PgId, parse_pg, pg_id, pg_server
from tests.conftest import LOCAL_HOST, NOW, ago

KEY = FileKey("254:0", 1234)
HOLDER, OTHER, DEAD = 4242, 4343, 999
PROCESSES = StaticProcesses(
    ProcessFacts(HOLDER, True, ago(3600), ("python", "worker.py"), "app"),
    ProcessFacts(OTHER, True, ago(3600), ("vim", "x.lock"), "app"),
)
CLOCK = FrozenClock(NOW)


def hold(
    pid: int = HOLDER, *, kind: str = "FLOCK", mode: str = "WRITE", owners: tuple[int, ...] = ()
) -> KernelLock:
    return KernelLock(
        1, kind, mode, KEY, 0, None, pid, owners=owners or ((pid,) if pid > 0 else ())
    )


def lock_file(
    *, pid: int | None = None, sentinel: bool = True, defects: tuple[Reason, ...] = ()
) -> Lock:
    policy = generic.SENTINEL if sentinel else generic.POLICY
    return Lock(
        id="file:/locks/x.lock",
        source="file",
        format="generic",
        name="x",
        path="/locks/x.lock",
        holder=Holder(pid=pid),
        acquired_at=ago(60),
        defects=defects,
        facts=FileFacts(policy, KEY),
    )


def judge(lock: Lock, evidence: KernelEvidence | None) -> tuple[Lock, Verdict]:
    attached = with_evidence(lock, evidence)
    return attached, evaluate(attached, PROCESSES, CLOCK, LOCAL_HOST)


def test_a_held_sentinel_is_active_with_the_kernel_holder() -> None:
    attached, verdict = judge(lock_file(), KernelEvidence(holds=(hold(),)))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("kernel_lock",)
    assert attached.holder.pid == HOLDER
    message = verdict.reasons[0].message
    assert message == "held with flock by pid 4242 (python worker.py)"


def test_the_kernel_beats_a_dead_pid_and_content_defects() -> None:
    bad = (Reason("unparseable", "content is neither JSON nor a pid"),)
    attached, verdict = judge(
        lock_file(pid=DEAD, sentinel=False, defects=bad), KernelEvidence(holds=(hold(OTHER),))
    )
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("kernel_lock", "unparseable")
    assert attached.holder.pid == OTHER


def test_a_shared_posix_hold_with_waiters_says_so() -> None:
    evidence = KernelEvidence(holds=(hold(kind="POSIX", mode="READ"),), waiters=2)
    _, verdict = judge(lock_file(), evidence)
    message = verdict.reasons[0].message
    assert message.startswith("held with fcntl/lockf, shared by pid 4242")
    assert message.endswith("2 waiting for it")


def test_an_unheld_sentinel_is_free_and_never_stale() -> None:
    # Free once the kernel was seen holding it (issue 33: else an empty file may
    # be an existence lock, unknown; tests/decoders/test_existence_locks.py).
    _, verdict = judge(lock_file(), KernelEvidence(was_held=True))
    assert verdict.state is State.FREE
    assert verdict.codes == ("not_held",)


def test_an_unheld_sentinel_a_live_process_has_open_is_active_open_by() -> None:
    _, verdict = judge(lock_file(), KernelEvidence(open_by=(DEAD, OTHER)))
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("open_by",)
    assert "pid 4343 (vim x.lock)" in verdict.reasons[0].message


def test_only_dead_openers_leave_it_free_and_unreadable_fds_are_admitted() -> None:
    evidence = KernelEvidence(open_by=(DEAD,), open_unknown=True, was_held=True)
    _, verdict = judge(lock_file(), evidence)
    assert verdict.state is State.FREE
    assert "could not be checked" in verdict.reasons[0].message


def test_a_pid_file_follows_the_kernel_once_a_lock_was_seen_on_it() -> None:
    plain = lock_file(pid=HOLDER, sentinel=False)
    _, never = judge(plain, KernelEvidence())
    assert never.state is State.ACTIVE  # a daemon's pid file
    _, released = judge(plain, KernelEvidence(was_held=True))
    assert released.state is State.FREE
    assert "lives on but no longer holds it" in released.reasons[0].message


def test_no_evidence_keeps_the_files_own_rules() -> None:
    _, verdict = judge(lock_file(), None)
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("no_pid",) or verdict.codes == ()


def test_a_kernel_only_sentinel_without_the_kernels_word_is_unknown() -> None:
    # Terraform's lock.info, little-loops' .acquire.lock: the tool asks the
    # kernel only, so without /proc/locks nobody here can tell.
    lock = refiled(lock_file(), {"policy": replace(generic.SENTINEL, kernel_only=True)})
    _, verdict = judge(lock, None)
    assert (verdict.state, verdict.codes) == (State.UNKNOWN, ("no_kernel_evidence",))
    _, verdict = judge(lock, KernelEvidence())
    assert verdict.state is State.FREE


def test_a_bare_sentinels_mtime_is_no_age_once_the_kernel_decides() -> None:
    """Every acquirer opens the sentinel (filelock's waiters truncate it): its
    mtime says nothing about the lock, so the kernel's verdicts give no age."""
    for evidence in (
        KernelEvidence(holds=(hold(),)),
        KernelEvidence(open_by=(OTHER,)),
        KernelEvidence(),
    ):
        _, verdict = judge(lock_file(), evidence)
        assert verdict.age_seconds is None, (evidence, verdict)
    # Without the kernel's word the file's own rules (and its mtime) stand.
    _, verdict = judge(lock_file(), None)
    assert verdict.age_seconds == 60.0
    # A pid file's time is its writer's: kept under the kernel too.
    _, verdict = judge(lock_file(pid=HOLDER, sentinel=False), KernelEvidence(holds=(hold(),)))
    assert verdict.age_seconds == 60.0


def test_seed_formats_are_not_sentinels() -> None:
    from lockwatch.sources.files.decoders import clawdbot

    lock = refiled(
        lock_file(pid=DEAD, sentinel=False), {"policy": clawdbot.POLICY}, format="clawdbot"
    )
    _, verdict = judge(lock, KernelEvidence(was_held=True))
    assert verdict.state is State.STALE


def kernel_record(kernel: KernelLock, path: str | None = "/locks/x.lock") -> Lock:
    return Lock(
        id=kernel_lock_id(kernel),
        source="kernel",
        format=kernel.format,
        name="x.lock",
        path=path,
        holder=Holder(pid=kernel.holder_pid),
        facts=KernelFacts.of(kernel),
    )


def test_kernel_records_are_held_or_waiting_with_no_invented_age() -> None:
    held = replace(hold(), blocking=(OTHER,))
    verdict = evaluate(kernel_record(held), PROCESSES, CLOCK, LOCAL_HOST)
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("kernel_lock", "blocking")
    assert verdict.age_seconds is None
    waiter = KernelLock(
        1, "FLOCK", "WRITE", KEY, 0, None, OTHER, waiting=True, blocked_by=(HOLDER,)
    )
    verdict = evaluate(kernel_record(waiter), PROCESSES, CLOCK, LOCAL_HOST)
    assert verdict.state is State.WAITING
    assert "blocked by pid 4242" in verdict.reasons[0].message


def test_an_ofd_lock_is_named_by_its_found_owner() -> None:
    ofd = KernelLock(3, "OFDLCK", "WRITE", KEY, 10, 19, -1, owners=(HOLDER,))
    assert ofd.format == "ofd"
    assert kernel_lock_id(ofd) == "kernel:254:0:1234:OFDLCK:10-19:4242"
    unknown = replace(ofd, owners=())
    assert kernel_lock_id(unknown).endswith(":-1")


@given(
    major=st.integers(0, 4095),
    minor=st.integers(0, 2**20),
    inode=st.integers(1, 2**63),
    kind=st.sampled_from(["FLOCK", "POSIX", "OFDLCK"]),
    start=st.integers(0, 2**63),
    length=st.one_of(st.none(), st.integers(0, 2**40)),
    pid=st.one_of(st.just(-1), st.integers(1, 2**22)),
)
def test_kernel_ids_round_trip(
    major: int, minor: int, inode: int, kind: str, start: int, length: int | None, pid: int
) -> None:
    end = None if length is None else start + length
    lock_id = kernel_id(f"{major}:{minor}", inode, kind, start, end, pid)
    parsed = parse_kernel(lock_id)
    assert parsed == KernelId(f"{major}:{minor}", inode, kind, start, end, pid)
    assert registry.id_prefix(lock_id) == "kernel"


def test_ids_are_parsed_in_one_place() -> None:
    pg = pg_id("monitor@db1:5432/app", 4242, "advisory/1:2", "ExclusiveLock", "held")
    assert parse_pg(pg) == PgId("monitor@db1:5432/app", "4242:advisory/1:2:ExclusiveLock:held")
    assert pg_server(pg) == "monitor@db1:5432/app"
    assert file_path(file_id("/a/b.lock")) == "/a/b.lock"
    assert registry.id_prefix("nonsense") is None and registry.id_prefix("zookeeper:x") is None
    assert parse_kernel("kernel:1:2:3:FLOCK:0-EOF") is None  # no pid
    assert parse_pg("pg:not-a-server") is None


def test_kernel_ids_are_filelocks_own_without_loading_it_at_start() -> None:
    """kernel/ids.py (every run loads it) names filelocks' prefix and builders
    without importing filelocks at its top (`ls --pg` never needs it)."""
    import ast
    import inspect

    from lockwatch.sources import filelocks
    from lockwatch.sources.kernel import ids

    assert ids.KERNEL == filelocks.KERNEL_ID
    assert kernel_id is filelocks.kernel_id and kernel_lock_id is filelocks.kernel_lock_id
    top = ast.parse(inspect.getsource(ids)).body
    imported = {node.module for node in top if isinstance(node, ast.ImportFrom)}
    assert "lockwatch.sources.filelocks" not in imported
