"""Lock churn for the benchmarks: writer processes that take, rewrite and release
lock files at a steady rate, in five formats, some written atomically (a temp
file renamed over the lock), some in place.

Used by bench_memory.py and bench_keys_under_churn.py (`Churn`), or on its own:

    python benchmarks/churn.py ROOT [--locks 808] [--rate 1000] [--writers 4] [--seconds 60]

Every lock slot belongs to one writer process and names it as holder, so the
held locks are active; a slot is taken, rewritten (a heartbeat, a new holder
operation) or released at random, about 40 % of the slots free at any time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

KINDS = 5
TICK_S = 0.01  # a writer does the operations due every TICK_S


def slot_path(root: Path, slot: int) -> Path:
    project = root / f"p{slot:05d}"
    kind = slot % KINDS
    if kind == 0:
        return project / "memory" / ".lock"
    if kind == 1:
        return project / ".GITCLAW" / "state" / "locks" / f"{slot}.lock"
    if kind == 2:
        return project / "logs" / "locks" / f"app-{slot}.lock"
    if kind == 3:
        return project / ".loops" / ".running" / f"loop-{slot}.lock"
    return project / "run" / f"daemon-{slot}.pid"


def slot_body(slot: int, pid: int, beat: int) -> bytes:
    now = datetime.now(UTC).isoformat()
    kind = slot % KINDS
    body: object
    if kind == 0:
        body = {"pid": pid, "session_id": f"s{beat}", "acquired_at": now, "operation": "write"}
    elif kind == 1:
        body = {"issueNumber": slot, "runId": str(beat), "acquiredAt": now, "pid": pid}
    elif kind == 2:
        name = f"app-{slot}"
        body = {
            "lock_version": "v1",
            "lock_name": name,
            "request_id": f"req_{slot}_{beat}",
            "actor": "churn",
            "intent": "deploy",
            "intent_version": "1.0.0",
            "host_id": os.uname().nodename,
            "pid": pid,
            "created_at": now,
            "last_heartbeat_at": now,
            "ttl_seconds": 900,
            "metadata": {},
        }
    elif kind == 3:
        body = {
            "loop_name": f"loop-{slot}",
            "scope": [f"src/m{slot}"],
            "pid": pid,
            "started_at": now,
        }
    else:
        return f"{pid}\n".encode()
    return json.dumps(body).encode()


def write(path: Path, data: bytes, atomic: bool) -> None:
    if atomic:
        temp = path.with_name(path.name + f".{os.getpid()}.tmp")
        temp.write_bytes(data)
        os.replace(temp, path)
    else:
        with open(path, "wb") as handle:  # in place: truncated, then written
            handle.write(data)


def run_writer(root: Path, slots: list[int], rate: float, seconds: float, seed: int) -> int:
    """One writer process: `rate` operations a second on its `slots`; how many it did."""
    rng = random.Random(seed)
    pid = os.getpid()
    held: set[int] = set()
    done = 0
    beat = 0
    try:
        for slot in slots:
            slot_path(root, slot).parent.mkdir(parents=True, exist_ok=True)
            write(slot_path(root, slot), slot_body(slot, pid, 0), atomic=slot % 2 == 0)
            held.add(slot)
        start = time.monotonic()
        stop = start + seconds
        while time.monotonic() < stop:
            due = int((time.monotonic() - start) * rate) - done
            for _ in range(due):
                slot = rng.choice(slots)
                path = slot_path(root, slot)
                beat += 1
                with contextlib.suppress(FileNotFoundError):
                    if slot not in held:
                        write(path, slot_body(slot, pid, beat), atomic=slot % 2 == 0)
                        held.add(slot)
                    elif rng.random() < 0.6:
                        write(path, slot_body(slot, pid, beat), atomic=slot % 2 == 0)
                    else:
                        path.unlink()
                        held.discard(slot)
                done += 1
            time.sleep(TICK_S)
    except KeyboardInterrupt:
        pass
    return done


class Churn:
    """`writers` processes churning `locks` lock files under `root` at `rate`
    operations a second in all, for at most `seconds` (stopped on exit)."""

    def __init__(
        self, root: Path, *, locks: int, rate: float, writers: int = 4, seconds: float = 3600
    ) -> None:
        self.root = root
        self.locks = locks
        self.rate = rate
        self.writers = writers
        self.seconds = seconds
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Churn:
        self.root.mkdir(parents=True, exist_ok=True)
        for w in range(self.writers):
            self.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        str(self.root),
                        "--locks",
                        str(self.locks),
                        "--rate",
                        str(self.rate / self.writers),
                        "--seconds",
                        str(self.seconds),
                        "--writers",
                        str(self.writers),
                        "--one",
                        str(w),
                    ],
                    stdout=subprocess.PIPE,
                )
            )
        return self

    def wait_started(self, timeout: float = 30.0) -> None:
        """Until every slot was written once (each writer takes all its slots first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            present = sum(slot_path(self.root, s).exists() for s in range(self.locks))
            if present >= self.locks * 0.9:
                return
            time.sleep(0.05)
        raise SystemExit("the churn writers did not start")

    def stop(self) -> int:
        """Stop the writers; how many operations they did."""
        done = 0
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            out, _ = proc.communicate(timeout=30)
            with contextlib.suppress(ValueError, IndexError):
                done += int(out.decode().split()[-1])
        self.procs.clear()
        return done

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("root", type=Path)
    parser.add_argument("--locks", type=int, default=808)
    parser.add_argument("--rate", type=float, default=1000.0, help="operations a second")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is None:
        with Churn(
            args.root,
            locks=args.locks,
            rate=args.rate,
            writers=args.writers,
            seconds=args.seconds,
        ) as churn:
            with contextlib.suppress(KeyboardInterrupt):
                for proc in churn.procs:
                    proc.wait()
            done = churn.stop()
        print(f"{done} operations in {args.seconds:g} s")
        return 0
    # One writer: its share of the slots and of the rate; SIGINT stops it.
    slots = list(range(args.one, args.locks, args.writers))
    done = run_writer(args.root, slots, args.rate, args.seconds, seed=args.one)
    print(done, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
