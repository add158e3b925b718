"""`lockwatch ls --json` against locks that real libraries hold.

Each helper process takes its lock with the real library or primitive (filelock,
portalocker, fasteners, zc.lockfile, flock(1), fcntl.flock/lockf, OFD fcntl; see
tests/kernel/holders.py: no imitation), then lockwatch runs as a real subprocess
(`python -m lockwatch ls --json [--kernel] --fail-on-stale DIR`) and its verdict
is checked against the contract AND against the library's own answer
(`library_says_held`: its non-blocking acquire attempt, in a fresh process).

The contract:
- a file a kernel lock is held on is `active`, reason `kernel_lock` ("held with
  flock by pid 4242 (...)"), holder.pid the process that holds it;
- a file with no pid of its own (empty, or a kernel-lock sentinel format) that no
  kernel lock is held on is `free`, reason `not_held`, unless a live process has
  it open (`active`, reason `open_by`, holder.pid that process);
- a pid file that carries a kernel lock follows the kernel (released, or its
  holder killed: `free`);
- `--kernel` without PATHs lists one record per /proc/locks entry: source
  `kernel`, format flock/posix/ofd, id
  `kernel:<maj:min>:<inode>:<TYPE>:<start>-<end|EOF>:<pid>`,
  `kernel: {type, mode, start, end, device, inode}`; a blocked waiter is its own
  `waiting` record with `blocked_by`, its holder has `blocking`;
- with PATHs, one row per file (issue 33): a held kernel lock on a file under
  them is the file's record (its `kernel` field, its holder), never a kernel
  record of its own; a waiter on it is still its own `waiting` record, under the
  file's holder in the blocking tree;
- `--fail-on-stale` exits 3 only on stale: free, active and waiting never count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.kernel.conftest import need
from tests.kernel.holders import (
    HOLDER_KINDS,
    KINDS,
    Holder,
    Holders,
    file_key,
    library_says_held,
    locks_on,
    running,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="kernel locks are read from /proc/locks"
)

REPO = Path(__file__).resolve().parents[2]
FORMATS = {"FLOCK": "flock", "POSIX": "posix", "OFDLCK": "ofd"}
EXIT_OK, EXIT_STALE = 0, 3
LS_TIMEOUT = 60.0

RELEASABLE = [kind for kind in HOLDER_KINDS if KINDS[kind].releasable]
KEEPS_OPEN = [kind for kind in HOLDER_KINDS if KINDS[kind].keeps_open]

Record = dict[str, Any]


# --------------------------------------------------------------------------- running lockwatch


@dataclass
class Listing:
    code: int
    doc: dict[str, Any]
    argv: list[str]

    @property
    def locks(self) -> list[Record]:
        return list(self.doc.get("locks", []))

    def file(self, path: Path) -> Record | None:
        """The file source's record of the lock file at `path`, if listed."""
        want = os.path.realpath(path)
        found = [
            lock
            for lock in self.locks
            if lock.get("source") == "file"
            and lock.get("path")
            and os.path.realpath(lock["path"]) == want
        ]
        assert len(found) <= 1, f"{path} listed {len(found)} times: {found}"
        return found[0] if found else None

    def kernel_on(self, path: Path) -> list[Record]:
        """The kernel source's records of locks on the file at `path`."""
        device, inode = file_key(path)
        return [
            lock
            for lock in self.locks
            if lock.get("source") == "kernel"
            and (lock.get("kernel") or {}).get("device") == device
            and (lock.get("kernel") or {}).get("inode") == inode
        ]

    def paths(self) -> list[str]:
        return sorted(str(lock.get("path")) for lock in self.locks)


def clean_env(home: Path) -> dict[str, str]:
    """The environment minus anything that would add sources or config: no
    LOCKWATCH_*/PG* variables, an empty config dir; this checkout's lockwatch."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LOCKWATCH_", "PG")) and key != "XDG_CONFIG_HOME"
    }
    config = home / "config"
    config.mkdir(exist_ok=True)
    env["XDG_CONFIG_HOME"] = str(config)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def run_ls(directory: Path, *flags: str, host_wide: bool = False) -> Listing:
    """`lockwatch ls --json --fail-on-stale FLAGS DIRECTORY` as a real process;
    `host_wide`: no DIRECTORY named (with --kernel, the host's every kernel lock)."""
    home = directory.parent / "lockwatch-home"
    home.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "lockwatch", "ls", "--json", "--fail-on-stale", *flags]
    if not host_wide:
        argv.append(str(directory))
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=LS_TIMEOUT,
        cwd=home,
        env=clean_env(home),
        check=False,
    )
    shown = " ".join(argv[2:])
    if done.returncode not in (EXIT_OK, EXIT_STALE):
        tail = "\n".join(done.stderr.strip().splitlines()[-6:])
        pytest.fail(f"`{shown}` exited {done.returncode}:\n{tail}", pytrace=False)
    try:
        doc = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"`{shown}` printed no JSON: {done.stdout[:500]!r}", pytrace=False)
    assert doc.get("schema") == "lockwatch.ls/1", doc.get("schema")
    return Listing(done.returncode, doc, argv)


# --------------------------------------------------------------------------- checks


def show(record: Record | None) -> str:
    if record is None:
        return "no record"
    keep = ("id", "state", "reasons", "holder", "blocked_by", "blocking", "kernel")
    shown = {key: record.get(key) for key in keep if key in record}
    holder = dict(shown.get("holder") or {})
    if isinstance(holder.get("process"), dict):  # its command line is enough
        holder["process"] = " ".join(holder["process"].get("cmdline") or [])
    shown["holder"] = {key: value for key, value in holder.items() if value is not None}
    return json.dumps(shown, indent=1)


def codes(record: Record) -> list[str]:
    return [reason.get("code") for reason in record.get("reasons", [])]


def message(record: Record, code: str) -> str:
    return str(next(reason["message"] for reason in record["reasons"] if reason["code"] == code))


def lock_file(tmp_path: Path, kind: str) -> Path:
    name = "service.pid" if kind == "portalocker_pidfile" else f"{kind}.lock"
    return tmp_path / "locks" / name


def expect_held(listing: Listing, holder: Holder, *, pids: frozenset[int] | None = None) -> Record:
    """The lock file is active on the kernel's word, naming a holding process."""
    pids = holder.holder_pids if pids is None else pids
    record = listing.file(holder.lock_path)
    assert record is not None, f"{holder.lock_path} not listed; listed: {listing.paths()}"
    assert record["state"] == "active", show(record)
    assert "kernel_lock" in codes(record), show(record)
    assert record["holder"]["pid"] in pids, (
        f"holder should be one of {sorted(pids)}: {show(record)}"
    )
    assert record["holder"]["alive"] is True, show(record)
    assert f"pid {record['holder']['pid']}" in message(record, "kernel_lock"), show(record)
    return record


def expect_free(listing: Listing, path: Path) -> Record:
    record = listing.file(path)
    assert record is not None, f"{path} not listed; listed: {listing.paths()}"
    if not path.read_bytes().strip():
        # Issue 33: an empty file no kernel lock is held on and nobody has open is a
        # released sentinel and an existence lock (npm's lockfile) alike, and a one-shot
        # listing never saw the kernel hold it: unknown, never free. (The dashboard saw
        # it held: free there, tests/kernel/test_dashboard.py.)
        assert record["state"] == "unknown", show(record)
        assert codes(record) == ["existence_unknown"], show(record)
        return record
    assert record["state"] == "free", show(record)
    assert "not_held" in codes(record), show(record)
    assert "kernel_lock" not in codes(record), show(record)
    return record


def expect_verdict_matches_library(listing: Listing, holder: Holder) -> None:
    """lockwatch and the library agree: active exactly when the library finds it
    held (for files lockwatch lists; a file that is gone is held by nobody)."""
    says_held = library_says_held(holder.kind.name, holder.path)
    record = listing.file(holder.lock_path)
    active = record is not None and record["state"] == "active"
    assert active == says_held, f"library says held={says_held}; lockwatch: {show(record)}"


def expect_exit(listing: Listing) -> None:
    """--fail-on-stale: 3 exactly when something is stale."""
    stale = [lock for lock in listing.locks if lock.get("state") == "stale"]
    assert listing.code == (EXIT_STALE if stale else EXIT_OK), [show(lock) for lock in stale]


def expect_kernel_record(
    listing: Listing, holder: Holder, *, pids: frozenset[int] | None = None
) -> Record:
    """One held kernel record on the file, as the contract spells it."""
    pids = holder.holder_pids if pids is None else pids
    spec = holder.kind
    device, inode = file_key(holder.lock_path)
    held = [lock for lock in listing.kernel_on(holder.lock_path) if lock["state"] != "waiting"]
    assert len(held) == 1, [show(lock) for lock in held]
    (record,) = held
    assert record["source"] == "kernel"
    assert record["format"] == FORMATS[spec.type], show(record)
    assert record["state"] == "active", show(record)
    assert record["kernel"] == {
        "type": spec.type,
        "mode": spec.mode,
        "start": spec.start,
        "end": spec.end,
        "device": device,
        "inode": inode,
    }, show(record)
    assert record["path"] is not None and os.path.realpath(record["path"]) == os.path.realpath(
        holder.lock_path
    ), show(record)
    assert record["holder"]["pid"] in pids, (
        f"holder should be one of {sorted(pids)}: {show(record)}"
    )
    end = "EOF" if spec.end is None else str(spec.end)
    head = f"kernel:{device}:{inode}:{spec.type}:{spec.start}-{end}:"
    assert record["id"].startswith(head), f"{record['id']!r} should start {head!r}"
    # The id's pid is the one /proc/locks gives (-1 for OFD; for flock the caller
    # of flock(), which may be gone while its descriptor lives on elsewhere).
    procfs = {line.pid for line in locks_on(holder.lock_path) if not line.waiting}
    assert int(record["id"][len(head) :]) in procfs | pids, record["id"]
    return record


def expect_joined(
    listing: Listing, holder: Holder, *, pids: frozenset[int] | None = None
) -> Record:
    """With PATHs, the kernel's held lock on the file is the file's own record (one
    row per file): its `kernel` field and holder, and no kernel record of its own."""
    pids = holder.holder_pids if pids is None else pids
    spec = holder.kind
    device, inode = file_key(holder.lock_path)
    held = [lock for lock in listing.kernel_on(holder.lock_path) if lock["state"] != "waiting"]
    assert held == [], [show(lock) for lock in held]
    record = expect_held(listing, holder, pids=pids)
    assert record["kernel"] == {
        "type": spec.type,
        "mode": spec.mode,
        "start": spec.start,
        "end": spec.end,
        "device": device,
        "inode": inode,
    }, show(record)
    return record


def expect_no_kernel_record(listing: Listing, path: Path) -> None:
    if path.exists():
        assert listing.kernel_on(path) == [], [show(lock) for lock in listing.kernel_on(path)]


def free_it(holder: Holder) -> None:
    """Let go leaving the file behind: release if it can (and keeps its file),
    else SIGKILL."""
    if holder.kind.releasable and not holder.kind.unlinks:
        holder.release()
    else:
        holder.kill()


# --------------------------------------------------------------------------- held


@pytest.mark.parametrize("kind", HOLDER_KINDS)
def test_held(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    directory = holder.path.parent

    listing = run_ls(directory)
    record = expect_held(listing, holder)
    expect_verdict_matches_library(listing, holder)
    expect_exit(listing)
    if holder.lock_path.stat().st_size == 0:  # a bare sentinel's mtime is not the lock's
        assert record["age_seconds"] is None and record["acquired_at"] is None, show(record)
    if kind == "zc_lockfile":  # its own pid and the kernel's holder agree
        assert record["holder"]["pid"] == holder.pid
    if kind == "portalocker_pidfile":  # the pid file beside the flocked sidecar
        pid_record = listing.file(holder.path)
        assert pid_record is not None and pid_record["state"] == "active", show(pid_record)
        assert pid_record["holder"]["pid"] == holder.pid, show(pid_record)

    with_kernel = run_ls(directory, "--kernel")
    expect_joined(with_kernel, holder)
    assert any(t["server"] == "kernel" for t in with_kernel.doc["blocking"])
    assert not any(t["server"] == "kernel" for t in listing.doc["blocking"])
    expect_exit(with_kernel)
    host = run_ls(directory, "--kernel", host_wide=True)
    kernel = expect_kernel_record(host, holder)
    assert not kernel.get("blocking"), show(kernel)


def test_flock_fd_names_the_shell_not_the_flock_that_exited(
    holders: Holders, tmp_path: Path
) -> None:
    """`exec 9>>f; flock 9`: /proc/locks names a flock(1) that already exited."""
    need("flock_fd")
    holder = holders.start("flock_fd", lock_file(tmp_path, "flock_fd"))
    (line,) = locks_on(holder.lock_path)
    assert not running(line.pid)

    listing = run_ls(holder.path.parent, "--kernel")
    assert expect_joined(listing, holder)["holder"]["pid"] == holder.pid
    host = run_ls(holder.path.parent, "--kernel", host_wide=True)
    assert expect_kernel_record(host, holder)["holder"]["pid"] == holder.pid


def test_flock_cmd_killed_flock_its_command_still_holds(holders: Holders, tmp_path: Path) -> None:
    """SIGKILL flock(1) alone: the command it ran keeps the lock. The holder is
    that live process, not the dead pid /proc/locks still names."""
    need("flock_cmd")
    holder = holders.start("flock_cmd", lock_file(tmp_path, "flock_cmd"))
    dead = holder.pid
    holder.kill_leader()
    (command,) = holder.holder_pids

    listing = run_ls(holder.path.parent, "--kernel")
    record = expect_held(listing, holder)
    assert record["holder"]["pid"] == command != dead, show(record)
    expect_verdict_matches_library(listing, holder)
    expect_joined(listing, holder)
    expect_exit(listing)
    host = run_ls(holder.path.parent, "--kernel", host_wide=True)
    kernel = expect_kernel_record(host, holder)
    assert kernel["holder"]["pid"] == command, show(kernel)


# --------------------------------------------------------------------------- released


@pytest.mark.parametrize("kind", RELEASABLE)
def test_released_and_lives_on(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    holder.release()
    assert holder.alive
    directory = holder.path.parent

    listing = run_ls(directory, "--kernel")
    if holder.kind.unlinks:  # PidFileLock removed both its files
        assert listing.file(holder.path) is None and listing.file(holder.lock_path) is None
    else:
        # zc.lockfile still names the live process: the kernel decides, it is free.
        expect_free(listing, holder.lock_path)
    expect_verdict_matches_library(listing, holder)
    expect_no_kernel_record(listing, holder.lock_path)
    expect_exit(listing)
    assert listing.code == EXIT_OK


@pytest.mark.parametrize("kind", KEEPS_OPEN)
def test_unlocked_but_open_is_active_open_by(kind: str, holders: Holders, tmp_path: Path) -> None:
    """No kernel lock, but a live process has the sentinel open: likely the holder.
    (Here lockwatch deliberately says more than the library, which finds it free.)"""
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    holder.release(keep_open=True)
    assert not library_says_held(kind, holder.path)

    listing = run_ls(holder.path.parent)
    record = listing.file(holder.path)
    assert record is not None, listing.paths()
    assert record["state"] == "active", show(record)
    assert "open_by" in codes(record) and "kernel_lock" not in codes(record), show(record)
    assert record["holder"]["pid"] == holder.pid, show(record)
    expect_exit(listing)
    assert listing.code == EXIT_OK


# --------------------------------------------------------------------------- SIGKILLed


@pytest.mark.parametrize("kind", HOLDER_KINDS)
def test_sigkilled(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    holder.kill()
    directory = holder.path.parent

    listing = run_ls(directory, "--kernel")
    # The file the kernel lock was on: nobody holds it (zc.lockfile's names a dead
    # pid, but it is a kernel-lock file: the kernel decides).
    expect_free(listing, holder.lock_path)
    expect_verdict_matches_library(listing, holder)
    expect_no_kernel_record(listing, holder.lock_path)
    if kind == "portalocker_pidfile":
        # The pid file names the dead process; it never carried the lock itself.
        pid_record = listing.file(holder.path)
        assert pid_record is not None, listing.paths()
        assert pid_record["state"] in ("stale", "free"), show(pid_record)
        if pid_record["state"] == "stale":
            assert "holder_dead" in codes(pid_record), show(pid_record)
        expect_exit(listing)
    else:
        assert listing.code == EXIT_OK, [show(lock) for lock in listing.locks]


# --------------------------------------------------------------------------- waiters


@pytest.mark.parametrize("kind", HOLDER_KINDS)
def test_blocked_waiter(kind: str, holders: Holders, tmp_path: Path) -> None:
    need(kind)
    holder = holders.start(kind, lock_file(tmp_path, kind))
    waiter = holders.start(holder.kind.waiter, holder.lock_path)
    directory = holder.path.parent

    listing = run_ls(directory)
    record = expect_held(listing, holder)
    assert record["holder"]["pid"] != waiter.pid
    expect_verdict_matches_library(listing, holder)
    assert listing.code == EXIT_OK  # waiting is not stale

    with_kernel = run_ls(directory, "--kernel")
    expect_joined(with_kernel, holder)
    host = run_ls(directory, "--kernel", host_wide=True)
    held = expect_kernel_record(host, holder)
    assert waiter.pid in (held.get("blocking") or []), show(held)
    waiting = [
        lock for lock in with_kernel.kernel_on(holder.lock_path) if lock["state"] == "waiting"
    ]
    assert len(waiting) == 1, [show(lock) for lock in waiting]
    (wait,) = waiting
    assert wait["holder"]["pid"] == waiter.pid, show(wait)
    assert wait["format"] == FORMATS[waiter.kind.type], show(wait)
    assert wait["kernel"]["type"] == waiter.kind.type, show(wait)
    assert wait["id"].endswith(f":{waiter.pid}"), wait["id"]
    blocked_by = wait.get("blocked_by") or []
    assert blocked_by and set(blocked_by) <= holder.holder_pids, (
        f"blocked_by should name {sorted(holder.holder_pids)}: {show(wait)}"
    )
    # The wait-for tree (the Contention view's): the waiter under its holder.
    (tree,) = [t for t in with_kernel.doc["blocking"] if t["server"] == "kernel"]
    under = {
        root["id"]: [waiter_node["id"] for waiter_node in root["waiters"]] for root in tree["roots"]
    }
    assert any(waiter.pid in under.get(pid, []) for pid in holder.holder_pids), (
        f"the kernel tree should put {waiter.pid} under one of {sorted(holder.holder_pids)}: {tree}"
    )
    assert with_kernel.code == EXIT_OK

    # The holder lets go: the waiter gets it, and lockwatch names the waiter.
    free_it(holder)
    waiter.wait_acquired()
    after = run_ls(directory, "--kernel")
    assert expect_joined(after, waiter)["holder"]["pid"] == waiter.pid
    assert library_says_held(waiter.kind.name, waiter.path)
    (now,) = run_ls(directory, "--kernel", host_wide=True).kernel_on(holder.lock_path)
    assert now["state"] == "active" and now["holder"]["pid"] == waiter.pid, show(now)
    assert not now.get("blocking") and not now.get("blocked_by"), show(now)
    expect_exit(after)
