"""Terraform's local state lock, against the real `terraform` binary.

Terraform (internal/states/statemgr/filesystem.go) locks the *state file* with a
POSIX write lock over the whole file (fcntl F_SETLK) and writes
`.terraform.tfstate.lock.info` next to it. The lock.info alone proves nothing: a
killed run leaves it behind and the next run proceeds. So lockwatch's verdict
is the kernel's, on the state file: `active` (`kernel_lock`, holder the
terraform process) while it is held, `free` (`not_held`) otherwise.

Terraform's own answer, in a fresh process, is `terraform plan
-lock-timeout=0s`: it fails with "Error acquiring the state lock" iff the
lock is held. The held lock comes from a real `terraform apply` whose
local-exec provisioner signals (creates `held`) and then waits for `release`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.formats.common import codes, ls_json, reap_groups, wait_until

pytestmark = [
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="kernel locks are read from /proc/locks"
    ),
]

TERRAFORM = "terraform"
DEADLINE = 60.0
LOCK_INFO = ".terraform.tfstate.lock.info"

MAIN_TF = """\
resource "terraform_data" "hold" {
  provisioner "local-exec" {
    command = "touch held; while [ ! -e release ]; do sleep 0.05; done"
  }
}
"""

# Terraform's lock-info helper: a POSIX write lock on the whole state file from
# a process of its own, the very call filesystem_lock_unix.go makes
# (F_SETLK, F_WRLCK, start 0, len 0); Python's lockf is that fcntl call.
LOCKF_HOLDER = """\
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
sys.stdout.write("R"); sys.stdout.flush()
sys.stdin.read()
"""


def _terraform_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "LOCKWATCH_", "PG"))}
    env.update(TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1", HOME=str(home))
    return env


def _have_terraform() -> bool:
    try:
        done = subprocess.run(
            [TERRAFORM, "version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return False
    return done.returncode == 0


needs_terraform = pytest.mark.skipif(not _have_terraform(), reason="terraform is not installed")


def lockwatch_ls(directory: Path, home: Path) -> list[dict[str, Any]]:
    doc = ls_json(directory, home, cwd=home, timeout=DEADLINE)
    assert doc["schema"] == "lockwatch.ls/1"
    locks: list[dict[str, Any]] = doc["locks"]
    return locks


def record(locks: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    found = [lock for lock in locks if lock["path"] == str(path)]
    assert len(found) == 1, [lock["path"] for lock in locks]
    return found[0]


@dataclass
class Project:
    root: Path
    home: Path
    procs: list[subprocess.Popen[Any]]

    def terraform(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TERRAFORM, *args, "-input=false", "-no-color"],
            cwd=self.root,
            env=_terraform_env(self.home),
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )

    def start_apply(self, *args: str) -> subprocess.Popen[bytes]:
        """`terraform apply`, once its provisioner runs: the state is locked then."""
        proc = subprocess.Popen(
            [TERRAFORM, "apply", "-auto-approve", "-input=false", "-no-color", *args],
            cwd=self.root,
            env=_terraform_env(self.home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its provisioner's shell dies with it on teardown
        )
        self.procs.append(proc)
        wait_until(
            "terraform apply to lock the state",
            (self.root / "held").exists,
            timeout=DEADLINE,
            proc=proc,
        )
        return proc

    def says_held(self) -> bool:
        """Terraform's own answer: a plan that will not wait for the lock."""
        done = self.terraform("plan", "-lock-timeout=0s", "-refresh=false")
        if done.returncode == 0:
            return False
        assert "Error acquiring the state lock" in done.stderr, done.stderr
        return True

    def hold_lockf(self, state: Path) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-c", LOCKF_HOLDER, str(state)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.read(1) == b"R"
        return proc


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    if not _have_terraform():
        pytest.skip("terraform is not installed")
    root = tmp_path / "infra"
    root.mkdir()
    (root / "main.tf").write_text(MAIN_TF)
    home = tmp_path / "home"
    home.mkdir()
    proj = Project(root, home, [])
    init = proj.terraform("init")
    assert init.returncode == 0, init.stderr
    try:
        yield proj
    finally:
        # The whole group: the provisioner's shell outlives a killed terraform.
        reap_groups(proj.procs, timeout=DEADLINE)


def lock_info_bytes(who: str, created: str, path: str = "terraform.tfstate") -> bytes:
    """Byte-for-byte what Terraform writes (json.Marshal of statemgr.LockInfo:
    compact, Go field order, no newline), as captured from terraform 1.11.4."""
    return (
        '{"ID":"e728b1e1-593a-c5e0-7247-bba990443e92","Operation":"OperationTypeApply",'
        f'"Info":"","Who":"{who}","Version":"1.11.4","Created":"{created}","Path":"{path}"}}'
    ).encode()


@needs_terraform
@pytest.mark.parametrize("state_arg", [None, "sub/custom.tfstate"])
def test_held_by_terraform_apply(project: Project, state_arg: str | None) -> None:
    # With -state the lock.info's Path is relative to terraform's working
    # directory, not to the lock.info: lockwatch must still find the state file.
    args = () if state_arg is None else (f"-state={state_arg}",)
    state = project.root / (state_arg or "terraform.tfstate")
    info = state.parent / f".{state.name}.lock.info"
    apply = project.start_apply(*args)
    raw = json.loads(info.read_bytes())
    assert list(raw) == ["ID", "Operation", "Info", "Who", "Version", "Created", "Path"]
    assert raw["Path"] == (state_arg or "terraform.tfstate")

    lock = record(lockwatch_ls(project.root, project.home), info)
    assert lock["format"] == "terraform"
    assert lock["state"] == "active"
    assert codes(lock) == ["kernel_lock"]
    assert lock["holder"]["pid"] == apply.pid
    assert lock["holder"]["operation"] == "OperationTypeApply"
    assert lock["holder"]["actor"] == raw["Who"]
    assert lock["holder"]["session"] == raw["ID"]
    assert lock["acquired_at"] is not None
    assert lock["scope"] == [str(state)]
    if state_arg is None:
        assert project.says_held() is True


@needs_terraform
def test_released_when_apply_finishes(project: Project) -> None:
    apply = project.start_apply()
    (project.root / "release").touch()
    assert apply.wait(timeout=DEADLINE) == 0
    assert not (project.root / LOCK_INFO).exists()
    locks = lockwatch_ls(project.root, project.home)
    assert [lock for lock in locks if lock["format"] == "terraform"] == []
    assert project.says_held() is False


@needs_terraform
def test_holder_killed_leaves_free_lock_info(project: Project) -> None:
    apply = project.start_apply()
    info = project.root / LOCK_INFO
    before = info.read_bytes()
    apply.send_signal(signal.SIGKILL)
    apply.wait(timeout=DEADLINE)
    assert info.read_bytes() == before  # Terraform leaves it behind

    lock = record(lockwatch_ls(project.root, project.home), info)
    assert lock["state"] == "free"
    assert codes(lock) == ["not_held"]
    assert lock["holder"]["operation"] == "OperationTypeApply"
    # Terraform agrees: the next run locks the state and proceeds, then
    # removes the leftover lock.info along with its own.
    assert project.says_held() is False
    assert not info.exists()


@needs_terraform
def test_foreign_host_lock_info(project: Project) -> None:
    # A byte-for-byte imitation: this host cannot run terraform as another host,
    # and what another host writes differs only in `Who` (user@hostname). On a
    # local filesystem the kernel lock on the state file still decides.
    state = project.root / "terraform.tfstate"
    state.touch()
    info = project.root / LOCK_INFO
    info.write_bytes(lock_info_bytes("ci@build-7", "2026-01-02T03:04:05.123456789Z"))
    info.chmod(0o600)

    lock = record(lockwatch_ls(project.root, project.home), info)
    assert lock["state"] == "free"
    assert codes(lock) == ["not_held"]
    assert lock["holder"]["actor"] == "ci@build-7"
    assert lock["holder"]["host"] == "build-7"
    assert project.says_held() is False

    # The same bytes, with the state held the way terraform holds it.
    info.write_bytes(lock_info_bytes("ci@build-7", "2026-01-02T03:04:05.123456789Z"))
    holder = project.hold_lockf(state)
    lock = record(lockwatch_ls(project.root, project.home), info)
    assert lock["state"] == "active"
    assert codes(lock) == ["kernel_lock"]
    assert lock["holder"]["pid"] == holder.pid
    assert project.says_held() is True


@needs_terraform
def test_lock_info_without_its_state_file_is_free(project: Project) -> None:
    # Byte-for-byte lock.info left beside no state file (the state was moved
    # away): no file, no kernel lock; terraform's next run creates, locks, proceeds.
    info = project.root / LOCK_INFO
    info.write_bytes(lock_info_bytes(f"me@{socket.gethostname()}", "2026-01-02T03:04:05Z"))
    assert not (project.root / "terraform.tfstate").exists()
    lock = record(lockwatch_ls(project.root, project.home), info)
    assert lock["state"] == "free"
    assert codes(lock) == ["not_held", "file_missing"]
    assert project.says_held() is False


@needs_terraform
@pytest.mark.parametrize(
    "content",
    [b"", b'{"ID":"e728b1e1-593a-c5e0', b"\x00\xff garbage", b"[1, 2]", b'{"ID": 7}'],
    ids=["empty", "truncated", "binary", "array", "wrong-type"],
)
def test_bad_lock_info(project: Project, content: bytes) -> None:
    # Terraform never decides by the lock.info (it only prints it after EAGAIN):
    # unheld, its next run proceeds. lockwatch says `invalid` rather than `free`
    # for a file it cannot read, but the kernel's word still wins when held.
    state = project.root / "terraform.tfstate"
    state.touch()
    info = project.root / LOCK_INFO
    info.write_bytes(content)
    lock = record(lockwatch_ls(project.root, project.home), info)
    assert lock["format"] == "terraform"
    assert lock["state"] == "invalid"
    assert codes(lock)[0] in ("unparseable", "schema_violation")
    assert project.says_held() is False
    assert not info.exists()  # terraform overwrote and removed it

    info.write_bytes(content)
    holder = project.hold_lockf(state)
    lock = record(lockwatch_ls(project.root, project.home), info)
    assert lock["state"] == "active"
    assert codes(lock)[0] == "kernel_lock"
    assert lock["holder"]["pid"] == holder.pid
