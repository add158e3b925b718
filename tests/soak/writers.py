"""Lock writers for the soak tests: one process, many threads, each thread a writer
taking, heartbeating and releasing its lock over and over, the way the systems
lockwatch watches do.

Run as `python -m tests.soak.writers SPEC` (SPEC is JSON, see `Spec`), from the
checkout. The JSON formats are written as the seed systems write them (clawdbot's
`memory/.lock`, gitclaw's issue locks, tower-fleet/v1 with heartbeats,
little-loops), atomically (a temp file linked or renamed into place) or in place
(truncate and write, as pid files and naive writers do); the rest are taken by the
real libraries: filelock (FileLock, SoftFileLock), flufl.lock, portalocker,
fasteners and zc.lockfile. No imitation of a library.

Protocol, one line each way:
- the process prints `{"ready": true}` once every writer took its first lock;
- `stop` on stdin: every writer finishes its cycle and leaves its lock held or
  released (half of each kind holds), and the process prints one JSON
  summary: ops done (by kind), seconds, and the locks it still holds;
- `exit` on stdin: a normal exit (what a library does at exit, it does); the test
  may instead SIGKILL the process to leave its locks behind, as a crash does.

A root that disappears under a writer (replaced, made unreadable) costs it that
op, never its life: it makes its directories again and goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

# Kinds, and where each writes its lock (relative to the writer's own directory).
JSON_KINDS = ("clawdbot", "gitclaw", "tower", "loops")
IN_PLACE_KINDS = ("pidfile", "inplace")
LIBRARY_KINDS = ("filelock", "softfilelock", "flufl", "portalocker", "fasteners", "zc")
KINDS = JSON_KINDS + IN_PLACE_KINDS + LIBRARY_KINDS
# Kinds whose lock file names a pid that lockwatch checks: held by a live process
# they are active, left by a dead one they are stale. (tower-fleet goes by its
# heartbeat and ttl, gitclaw by its age, as their specs say.)
PID_KINDS = frozenset({"clawdbot", "loops", "pidfile", "inplace", "softfilelock", "flufl"})


def relative_path(kind: str, index: int) -> str:
    return {
        "clawdbot": "memory/.lock",
        "gitclaw": f".GITCLAW/state/locks/{index}.lock",
        "tower": f"logs/locks/deploy-{index}.lock",
        "loops": f".loops/.running/loop-{index}.lock",
        "pidfile": f"run/worker-{index}.pid",
        "inplace": f"app-{index}.lock",
        "filelock": f"cache-{index}.lock",
        "softfilelock": f"soft-{index}.lock",
        "flufl": f"flufl-{index}.lock",
        "portalocker": f"portal-{index}.lock",
        "fasteners": f"fast-{index}.lock",
        "zc": f"zc-{index}.lock",
    }[kind]


@dataclass
class Spec:
    root: str
    writers: int  # threads in this process
    first: int  # this process's first writer number (names are unique across processes)
    rate: float  # ops per second, the whole process
    seed: int = 0
    host: str = field(default_factory=socket.gethostname)
    kinds: tuple[str, ...] = KINDS


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat()


def js_iso(at: datetime) -> str:
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def document(kind: str, number: int, host: str, beat: int) -> bytes:
    """The lock's bytes as the seed system writes them; `beat` makes each write new."""
    now = datetime.now(UTC)
    pid = os.getpid()
    if kind == "clawdbot":
        doc: dict[str, Any] = {
            "pid": pid,
            "session_id": f"session-{number}-{beat}",
            "acquired_at": iso(now),
            "hostname": host,
            "operation": "write memory/tasks.json",
        }
    elif kind == "gitclaw":
        doc = {"issueNumber": number, "runId": f"{number}{beat:06d}", "acquiredAt": js_iso(now)}
        doc["pid"] = pid
    elif kind == "tower":
        doc = {
            "lock_version": "v1",
            "lock_name": f"deploy-{number}",
            "request_id": f"req_{number}_{beat}",
            "actor": "soak",
            "intent": "deploy",
            "intent_version": "1",
            "host_id": host,
            "pid": pid,
            "created_at": js_iso(now - timedelta(seconds=beat % 5)),
            "last_heartbeat_at": js_iso(now),
            "ttl_seconds": 3600,
            "metadata": {"beat": beat},
        }
    elif kind == "loops":
        doc = {
            "loop_name": f"loop-{number}",
            "scope": [f"/srv/loop-{number}"],
            "pid": pid,
            "started_at": iso(now),
        }
    elif kind == "pidfile":
        return f"{pid}\n".encode()
    elif kind == "inplace":
        doc = {"pid": pid, "host": host, "operation": f"job {number}", "beat": beat}
    else:
        raise ValueError(kind)
    return (json.dumps(doc, indent=2) + "\n").encode()


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _temp(path: str) -> str:
    return f"{path}.{os.getpid()}.{threading.get_ident() % 100000}.{random.getrandbits(24):x}.tmp"


class Writer:
    """One writer: its lock, taken and let go of in a loop."""

    def __init__(self, spec: Spec, number: int, kind: str, period: float) -> None:
        self.spec = spec
        self.number = number
        self.kind = kind
        self.path = os.path.join(spec.root, f"w{number:04d}", relative_path(kind, number))
        self.period = period
        self.rng = random.Random(spec.seed * 100_003 + number)
        self.ops = 0
        self.failures = 0
        self.beat = 0
        self.held = False
        self.handle: Any = None
        self.content: bytes | None = None
        self.errors: list[str] = []

    # -- one op each -----------------------------------------------------------

    def _dirs(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)

    def acquire(self) -> None:
        self._dirs()
        self.beat += 1
        kind = self.kind
        if kind in JSON_KINDS:
            data = document(kind, self.number, self.spec.host, self.beat)
            temp = _temp(self.path)
            _write_new(temp, data)
            try:
                os.link(temp, self.path)  # fails if somebody holds it: tower-fleet's mv -n
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)
            self.content = data
        elif kind in IN_PLACE_KINDS:
            data = document(kind, self.number, self.spec.host, self.beat)
            with open(self.path, "wb") as out:  # truncate, then write: in place
                out.write(data)
            self.content = data
        elif kind == "filelock":
            import filelock

            self.handle = filelock.FileLock(self.path)
            self.handle.acquire(timeout=5)
        elif kind == "softfilelock":
            import filelock

            self.handle = filelock.SoftFileLock(self.path)
            self.handle.acquire(timeout=5)
        elif kind == "flufl":
            from flufl.lock import Lock

            self.handle = Lock(self.path, lifetime=timedelta(hours=1))
            self.handle.lock(timeout=timedelta(seconds=5))
        elif kind == "portalocker":
            import portalocker

            self.handle = portalocker.Lock(self.path, "a", timeout=5)
            self.handle.acquire()
        elif kind == "fasteners":
            import fasteners

            self.handle = fasteners.InterProcessLock(self.path)
            if not self.handle.acquire(timeout=5):
                raise TimeoutError(f"fasteners could not take {self.path}")
        elif kind == "zc":
            import zc.lockfile

            self.handle = zc.lockfile.LockFile(self.path)
        self.held = True

    def heartbeat(self) -> None:
        self.beat += 1
        data = document(self.kind, self.number, self.spec.host, self.beat)
        if self.kind in JSON_KINDS:
            temp = _temp(self.path)
            _write_new(temp, data)
            os.replace(temp, self.path)  # atomic
        else:
            with open(self.path, "r+b") as out:  # in place
                out.truncate(0)
                out.write(data)
        self.content = data

    def release(self) -> None:
        kind = self.kind
        if kind in JSON_KINDS or kind in IN_PLACE_KINDS:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        elif kind == "flufl":
            self.handle.unlock(unconditionally=True)
        elif kind == "zc":
            self.handle.close()
        else:
            self.handle.release()
        self.held = False
        self.handle = None
        self.content = None

    # -- the loop --------------------------------------------------------------

    def op(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - OSError, or a library's own timeout class
            # The root went away or was closed under us, or a library gave up: that op
            # is lost, not the writer.
            self.failures += 1
            if len(self.errors) < 3:
                self.errors.append(f"{self.kind} {action.__name__}: {type(exc).__name__}: {exc}")
        self.ops += 1
        time.sleep(self.period * self.rng.uniform(0.5, 1.5))

    def cycle(self) -> None:
        if not self.held:
            self.op(self.acquire)
        if self.held and self.kind in JSON_KINDS + IN_PLACE_KINDS and self.rng.random() < 0.5:
            self.op(self.heartbeat)
        if self.held:
            self.op(self.release)

    def settle(self, keep: bool) -> None:
        """Leave the lock held (`keep`, taken afresh: whatever the churn did to the
        tree, it is there now) or released, for the final comparison."""
        if self.held:
            with contextlib.suppress(Exception):  # its files may be gone with a root
                self.release()
            self.held, self.handle, self.content = False, None, None
        for _ in range(50 if keep else 0):
            try:
                self.acquire()
            except Exception:  # noqa: BLE001 - a root closed at that instant: again
                time.sleep(0.01)
            else:
                return


def main(raw: str) -> None:
    options = json.loads(raw)
    options["kinds"] = tuple(options.get("kinds", KINDS))
    spec = Spec(**options)
    period = spec.writers / spec.rate  # each writer's share of the rate
    writers = [
        Writer(spec, spec.first + i, spec.kinds[(spec.first + i) % len(spec.kinds)], period)
        for i in range(spec.writers)
    ]
    stop = threading.Event()
    started = threading.Barrier(spec.writers + 1)
    errors: list[str] = []

    def run(writer: Writer) -> None:
        try:
            writer.op(writer.acquire)
            started.wait(timeout=60)
            while not stop.is_set():
                writer.cycle()
            # Half of each kind stays held: which half, by the writer's number.
            writer.settle(keep=(writer.number // len(spec.kinds)) % 2 == 0)
        except BaseException as exc:  # noqa: BLE001 - said on stdout, then the test fails
            errors.append(f"writer {writer.number} ({writer.kind}): {type(exc).__name__}: {exc}")
            with contextlib.suppress(threading.BrokenBarrierError):
                started.abort()

    threads = [threading.Thread(target=run, args=(w,), daemon=True) for w in writers]
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        started.wait(timeout=60)
    began = time.monotonic()
    print(json.dumps({"ready": True, "pid": os.getpid()}), flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            elapsed = time.monotonic() - began
            by_kind: dict[str, int] = {}
            for writer in writers:
                by_kind[writer.kind] = by_kind.get(writer.kind, 0) + writer.ops
            summary = {
                "pid": os.getpid(),
                "seconds": elapsed,
                "ops": sum(w.ops for w in writers),
                "failures": sum(w.failures for w in writers),
                "by_kind": by_kind,
                "held": {w.path: w.kind for w in writers if w.held},
                "released": {w.path: w.kind for w in writers if not w.held},
                "errors": errors,
                "op_errors": [e for w in writers for e in w.errors][:20],
                "alive_threads": sum(t.is_alive() for t in threads),
            }
            print(json.dumps(summary), flush=True)
        elif line.strip() == "exit":
            return


if __name__ == "__main__":
    main(sys.argv[1])
