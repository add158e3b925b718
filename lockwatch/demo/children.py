"""The demo's cast: small programs that take, hold and release locks the way the seed
systems do, run as real processes: `python -m lockwatch.demo.children KIND [OPTIONS]`.

- `clawdbot` (seed 000): a session writing `memory/.lock` around short operations;
  when the lock is busy it backs off exponentially (100 ms doubling to 2 s, giving up
  after --max-wait) and breaks a lock whose holder is dead or which is over 30 s old.
- `gitclaw` (seed 001): workflow runs for one issue taking `<N>.lock`, skipping the
  issue while another run holds it, cleaning locks 10 minutes old; `--cancelled-ago`
  leaves the lock of a run that was cancelled before its `finally` ran.
- `tower` (seed 002): an executor taking `<lock_name>.lock` with exclusive creation,
  heartbeating while it runs, releasing only its own request's lock; `--hang-after`
  makes it stop heartbeating and hang, `--ttl-as-string` writes a schema violation.
- `loops` (seed 004): a loop taking `.loops/.running/<name>.lock` for its scope after
  checking running loops for overlaps; `--queue` waits for the scope instead of giving
  up, `--racy-start` skips the first check (two loops started in the same instant both
  pass it before either writes: the seed's check-then-create race).
- `flock`: a build step guarding an empty sentinel file with flock(2), as
  filelock, portalocker and flock(1) do: the file says nothing, only the kernel
  knows whether it is held (active while held, free between runs).
- `guardian`: started first, reads what the demo started from its stdin; if that pipe
  closes without the demo saying it cleaned up (the demo was SIGKILLed), it cleans up
  (guardian.py).

Every child except the guardian stops when sent SIGTERM/SIGINT/SIGHUP or when its
parent goes (its parent pid changes; on Linux also PR_SET_PDEATHSIG): it releases what
it holds and exits. Each logs what it does, one line per event, to stderr.

Standard library only (psycopg for the guardian's last resort on a named server), and
not even all of it: seventeen children start at once, often on two cores, next to an
embedded PostgreSQL being initialised, and the hanging executor's clock is running. So
no dataclasses, secrets or shutil at import time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

from lockwatch.demo import lockfiles as lf
from lockwatch.demo.life import Life

Span = tuple[float, float]
Log = Callable[[str], None]

# seed 000
CLAWDBOT_STALE_S = 30.0
CLAWDBOT_FOREIGN_STALE_S = 10.0
BACKOFF_BASE_MS = 100
BACKOFF_MAX_MS = 2000
# seed 001
GITCLAW_TTL_S = 600.0
# seed 004: wait_for_scope polls once a second
QUEUE_POLL_S = 1.0


def make_log(name: str) -> Log:
    def log(message: str) -> None:
        stamp = lf.js_iso(lf.utc_now())
        sys.stderr.write(f"{stamp} {name}[{os.getpid()}] {message}\n")
        sys.stderr.flush()

    return log


def span(text: str) -> Span:
    """`2` or `1,3` (seconds, a range to pick from) or `inf`."""
    parts = [float(part) for part in text.split(",")]
    if len(parts) == 1:
        return parts[0], parts[0]
    if len(parts) != 2 or parts[0] > parts[1]:
        raise argparse.ArgumentTypeError(f"not a duration or LOW,HIGH range: {text!r}")
    return parts[0], parts[1]


def pick(rng: random.Random, between: Span) -> float:
    low, high = between
    return low if low == high else rng.uniform(low, high)


# --------------------------------------------------------------------------- seed 000


class _Memory:
    """A clawdbot session's hold on `memory/.lock`, as the seed takes it (a plain
    class: no dataclasses at a child's start)."""

    def __init__(self, args: argparse.Namespace, life: Life, log: Log) -> None:
        self.args, self.life, self.log = args, life, log
        self.lock = Path(args.memory) / ".lock"
        self.lock.parent.mkdir(parents=True, exist_ok=True)
        self.me = os.getpid()
        self.host = socket.gethostname()

    def stale(self, doc: lf.Doc) -> str | None:
        # The seed's _is_lock_stale, in its order.
        pid = doc.get("pid")
        if pid and not lf.pid_alive(pid):
            return f"process {pid} is dead"
        age = lf.age_seconds(doc.get("acquired_at"), lf.utc_now())
        if age is not None and age > CLAWDBOT_STALE_S:
            return f"lock is {age:.1f}s old (>{CLAWDBOT_STALE_S:g}s)"
        hostname = doc.get("hostname")
        if (
            hostname
            and hostname != self.host
            and age is not None
            and age > CLAWDBOT_FOREIGN_STALE_S
        ):
            return f"cross-machine lock from {hostname}, {age:.1f}s old"
        return None

    def try_acquire(self, operation: str) -> bool:
        lock, me = self.lock, self.me
        data = lf.encode(
            lf.clawdbot_doc(
                pid=me,
                session_id=self.args.session,
                acquired_at=lf.utc_now(),
                hostname=self.host,
                operation=operation,
            )
        )
        if lf.create_exclusive(lock, data):
            return True
        doc = lf.read_doc(lock)
        if doc is None:
            if not lock.exists():
                return lf.create_exclusive(lock, data)
            reason: str | None = "the lock file is not valid JSON"
        elif doc.get("pid") == me:
            return True  # re-entrant, as the seed is
        else:
            reason = self.stale(doc)
        if reason is None:
            return False
        self.log(f"[LOCK] Breaking stale lock: {reason}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        return lf.create_exclusive(lock, data)

    def acquire_blocking(self, operation: str) -> bool:
        args, life, log = self.args, self.life, self.log
        start = time.monotonic()
        attempt = 0
        backoff_ms = 0
        while life.going:
            if self.try_acquire(operation):
                waited = time.monotonic() - start
                after = f" after {attempt + 1} tries ({waited:.1f}s)" if attempt else ""
                log(f"acquired memory/.lock for {operation}{after}")
                return True
            if time.monotonic() - start >= args.max_wait:
                doc = lf.read_doc(self.lock) or {}
                log(
                    f"Could not acquire lock within {args.max_wait:g}s. Held by session"
                    f" '{doc.get('session_id', 'unknown')}' for operation"
                    f" '{doc.get('operation', 'unknown')}'"
                )
                return False
            if not life.sleep(backoff_ms / 1000.0):
                return False
            attempt += 1
            backoff_ms = min(BACKOFF_BASE_MS * 2**attempt, BACKOFF_MAX_MS)
        return False

    def release(self) -> None:
        if lf.remove_if(self.lock, lambda doc: doc.get("pid") == self.me):
            self.log("released memory/.lock")


def clawdbot(args: argparse.Namespace, life: Life, log: Log, rng: random.Random) -> int:
    memory = _Memory(args, life, log)
    operations: list[str] = args.operation or ["write:tasks.json"]
    held = False
    try:
        while life.going:
            operation = rng.choice(operations)
            held = memory.acquire_blocking(operation)
            if held:
                life.sleep(pick(rng, args.hold))
                memory.release()
                held = False
            life.sleep(pick(rng, args.pause))
    finally:
        if held:
            memory.release()
    return 0


# --------------------------------------------------------------------------- seed 001


def gitclaw(args: argparse.Namespace, life: Life, log: Log, rng: random.Random) -> int:
    locks = Path(args.locks)
    locks.mkdir(parents=True, exist_ok=True)
    issue: int = args.issue
    lock = locks / f"{issue}.lock"
    me = os.getpid()

    def new_run_id() -> str:
        return str(rng.randrange(10_000_000_000, 99_999_999_999))

    if args.cancelled_ago is not None:
        run_id = new_run_id()
        acquired = lf.utc_now() - timedelta(seconds=args.cancelled_ago)
        doc = lf.gitclaw_doc(issue=issue, run_id=run_id, acquired_at=acquired, pid=me)
        if lf.create_exclusive(lock, lf.encode(doc)):
            log(
                f"Acquired lock for issue #{issue} (run {run_id}, {args.cancelled_ago:g}s ago);"
                " the run was cancelled (SIGTERM) before its finally block released it"
            )
        return 0

    def clean_stale_locks() -> None:
        now = lf.utc_now()
        for path in sorted(locks.glob("*.lock")):
            doc = lf.read_doc(path)
            age = lf.age_seconds(doc.get("acquiredAt"), now) if doc is not None else None
            if doc is None or (age is not None and age >= GITCLAW_TTL_S):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                log(f"Cleaned stale lock {path.name}")

    def acquire(run_id: str) -> bool:
        existing = lf.read_doc(lock)
        if existing is not None:
            age = lf.age_seconds(existing.get("acquiredAt"), lf.utc_now())
            if age is not None and age < GITCLAW_TTL_S:
                log(
                    f"Issue #{issue} is being processed by run {existing.get('runId')};"
                    " skipping this run"
                )
                return False
            log(f"Cleaning stale lock for issue #{issue} (run {existing.get('runId')})")
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
        doc = lf.gitclaw_doc(issue=issue, run_id=run_id, acquired_at=lf.utc_now(), pid=me)
        if not lf.create_exclusive(lock, lf.encode(doc)):
            log(f"Lost the race for issue #{issue}; skipping this run")
            return False
        log(f"Acquired lock for issue #{issue} (run {run_id})")
        return True

    def release(run_id: str) -> None:
        if lf.remove_if(lock, lambda doc: doc.get("runId") == run_id):
            log(f"Released lock for issue #{issue} (run {run_id})")
        else:
            log(f"Lock for issue #{issue} owned by a different run, not releasing")

    held: str | None = None
    try:
        while life.going:
            run_id = new_run_id()
            clean_stale_locks()
            if acquire(run_id):
                held = run_id
                life.sleep(pick(rng, args.hold))
                release(run_id)
                held = None
            life.sleep(pick(rng, args.pause))
    finally:
        if held is not None:
            release(held)
    return 0


# --------------------------------------------------------------------------- seed 002


class _Tower:
    """An executor's `<lock_name>.lock`, as the seed takes, heartbeats and releases it
    (a plain class: no dataclasses at a child's start)."""

    def __init__(self, args: argparse.Namespace, log: Log) -> None:
        self.args, self.log = args, log
        self.name: str = args.name
        self.lock = Path(args.locks) / f"{self.name}.lock"
        self.lock.parent.mkdir(parents=True, exist_ok=True)
        self.ttl: int = args.ttl
        self.host = socket.gethostname()

    @staticmethod
    def is_stale(doc: lf.Doc) -> bool:
        age = lf.age_seconds(doc.get("last_heartbeat_at"), lf.utc_now())
        limit = doc.get("ttl_seconds")
        return age is not None and isinstance(limit, int) and age > limit

    def acquire(self, request_id: str) -> bool:
        args, name, ttl = self.args, self.name, self.ttl
        now = lf.utc_now()
        doc = lf.tower_doc(
            lock_name=name,
            request_id=request_id,
            actor=args.actor,
            intent=args.intent,
            intent_version=args.intent_version,
            host_id=self.host,
            pid=os.getpid(),
            created_at=now,
            heartbeat_at=now,
            ttl_seconds=str(ttl) if args.ttl_as_string else ttl,
            metadata={"ticket": args.ticket} if args.ticket else None,
        )
        if lf.create_exclusive(self.lock, lf.encode(doc), tag=request_id):
            self.log(f"Lock acquired: {name} ({request_id}, ttl {ttl}s)")
            return True
        existing = lf.read_doc(self.lock) or {}
        if self.is_stale(existing):
            self.log(
                f"ERROR: Lock is stale (held by {existing.get('request_id')}). Use --force-lock"
            )
        else:
            self.log(f"ERROR: Lock is held by active process ({existing.get('request_id')})")
        return False

    def heartbeat(self, request_id: str) -> bool:
        doc = lf.read_doc(self.lock)
        if doc is None or doc.get("request_id") != request_id:
            return False
        doc["last_heartbeat_at"] = lf.tower_iso(lf.utc_now())
        lf.replace_atomic(self.lock, lf.encode(doc), tag="heartbeat")
        return True

    def release(self, request_id: str) -> None:
        if lf.remove_if(self.lock, lambda doc: doc.get("request_id") == request_id):
            self.log(f"Lock released: {self.name}")

    def run(self, request_id: str, life: Life, rng: random.Random) -> str:
        """One run holding the lock, heartbeating: "done", "lost" (broken or
        stolen) or "hung" (it stopped heartbeating and slept until stopped)."""
        # The spec heartbeats every ttl/3; a little sooner keeps a healthy executor from
        # ever looking late (lockwatch flags a heartbeat older than ttl/3).
        interval = self.ttl / 4
        hang_after = self.args.hang_after
        run_for = pick(rng, self.args.run)
        started = time.monotonic()
        while life.going:
            left = run_for - (time.monotonic() - started)
            if left <= 0 or not life.sleep(min(interval, left)):
                break
            if hang_after is not None and time.monotonic() - started >= hang_after:
                self.log(
                    f"hung: no more heartbeats; the lock goes stale {self.ttl}s after the last one"
                )
                return "hung"
            if not self.heartbeat(request_id):
                self.log(f"Lock {self.name} lost (broken or stolen): aborting the run")
                return "lost"
        return "done"


def tower(args: argparse.Namespace, life: Life, log: Log, rng: random.Random) -> int:
    executor = _Tower(args, log)
    held: str | None = None
    try:
        while life.going:
            request_id = f"req_{rng.getrandbits(48):012x}"
            if not executor.acquire(request_id):
                life.sleep(pick(rng, args.pause))
                continue
            held = request_id
            ended = executor.run(request_id, life, rng)
            if ended == "hung":
                held = None  # a hung executor cleans nothing up, even when stopped
                life.sleep(float("inf"))
                return 0
            if ended == "lost":
                held = None
            if held is not None:
                executor.release(held)
                held = None
            life.sleep(pick(rng, args.pause))
    finally:
        if held is not None:
            executor.release(held)
    return 0


# --------------------------------------------------------------------------- seed 004


def _overlap(a: str, b: str) -> bool:
    """The same path, or one inside the other."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def loops(args: argparse.Namespace, life: Life, log: Log, rng: random.Random) -> int:
    project = Path(args.project).resolve()
    running = project / ".loops" / ".running"
    name: str = args.name
    lock = running / f"{name}.lock"
    scope = [os.path.normpath(project / path) for path in (args.scope or ["."])]
    me = os.getpid()

    def find_conflict() -> str | None:
        # As the seed: a lock whose pid is dead is cleaned up on the way.
        for path in sorted(running.glob("*.lock")):
            if path == lock:
                continue
            doc = lf.read_doc(path)
            if doc is None:
                continue
            if not lf.pid_alive(doc.get("pid")):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                log(f"removed the stale lock of loop {doc.get('loop_name')!r}")
                continue
            theirs = doc.get("scope")
            if isinstance(theirs, list) and any(
                _overlap(mine, str(other)) for mine in scope for other in theirs
            ):
                return str(doc.get("loop_name"))
        return None

    def release() -> None:
        if lf.remove_if(lock, lambda doc: doc.get("pid") == me):
            log(f"loop {name} finished; released {lock.name}")

    held = False
    checked = not args.racy_start
    try:
        while life.going:
            conflict = find_conflict() if checked else None
            checked = True
            if conflict is not None and args.queue:
                log(f"Waiting for conflicting loop '{conflict}' to finish...")
                while conflict is not None and life.sleep(QUEUE_POLL_S):
                    conflict = find_conflict()
                if conflict is not None:
                    break
            elif conflict is not None:
                log(f"Scope conflict with running loop '{conflict}'. Use --queue to wait for it")
                life.sleep(pick(rng, args.pause))
                continue
            running.mkdir(parents=True, exist_ok=True)
            doc = lf.loops_doc(loop_name=name, scope=scope, pid=me, started_at=lf.utc_now())
            if not lf.create_exclusive(lock, lf.encode(doc, indent=None)):
                log(f"loop {name} is already running")
                life.sleep(pick(rng, args.pause))
                continue
            held = True
            log(f"loop {name} started; holds {', '.join(scope)}")
            life.sleep(pick(rng, args.run))
            release()
            held = False
            life.sleep(pick(rng, args.pause))
    finally:
        if held:
            release()
    return 0


# --------------------------------------------------------------------------- flock


def _flock(fd: int, life: Life) -> bool:
    """Whether it got the lock before it was time to stop. Non-blocking tries:
    a blocking flock() would outlive a stop signal."""
    import fcntl

    while life.going:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            life.sleep(QUEUE_POLL_S / 4)
    return False


def flock(args: argparse.Namespace, life: Life, log: Log, rng: random.Random) -> int:
    import fcntl

    path = Path(args.lock)
    path.parent.mkdir(parents=True, exist_ok=True)
    while life.going:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _flock(fd, life):
                break
            log(f"build started; holds {path.name} (flock)")
            life.sleep(pick(rng, args.hold))
            fcntl.flock(fd, fcntl.LOCK_UN)
            log(f"build done; released {path.name}")
        finally:
            os.close(fd)
        life.sleep(pick(rng, args.pause))
    return 0


# --------------------------------------------------------------------------- entry point

KINDS: dict[str, Callable[[argparse.Namespace, Life, Log, random.Random], int]] = {
    "clawdbot": clawdbot,
    "gitclaw": gitclaw,
    "tower": tower,
    "loops": loops,
    "flock": flock,
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m lockwatch.demo.children")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--parent", type=int, default=None, help="stop when this pid goes")
    common.add_argument("--pdeathsig", action="store_true")
    common.add_argument("--label", default=None, help="how the log names this child")
    common.add_argument("--delay", type=float, default=0.0, help="seconds before starting")
    common.add_argument("--seed", type=int, default=None)
    kinds = top.add_subparsers(dest="kind", required=True)

    p = kinds.add_parser("clawdbot", parents=[common])
    p.add_argument("--memory", required=True, help="the memory/ directory")
    p.add_argument("--session", required=True)
    p.add_argument("--operation", action="append")
    p.add_argument("--hold", type=span, default=(0.3, 1.5))
    p.add_argument("--pause", type=span, default=(0.5, 3.0))
    p.add_argument("--max-wait", type=float, default=5.0)

    p = kinds.add_parser("gitclaw", parents=[common])
    p.add_argument("--locks", required=True, help="the .GITCLAW/state/locks directory")
    p.add_argument("--issue", type=int, required=True)
    p.add_argument("--hold", type=span, default=(8.0, 20.0))
    p.add_argument("--pause", type=span, default=(2.0, 6.0))
    p.add_argument("--cancelled-ago", type=float, default=None)

    p = kinds.add_parser("tower", parents=[common])
    p.add_argument("--locks", required=True, help="the logs/locks directory")
    p.add_argument("--name", dest="name", required=True, help="the lock_name")
    p.add_argument("--intent", required=True)
    p.add_argument("--intent-version", default="1.0.0")
    p.add_argument("--actor", default="claude-code")
    p.add_argument("--ttl", type=int, default=12)
    p.add_argument("--run", type=span, default=(15.0, 30.0))
    p.add_argument("--pause", type=span, default=(2.0, 4.0))
    p.add_argument("--hang-after", type=float, default=None)
    p.add_argument("--ttl-as-string", action="store_true")
    p.add_argument("--ticket", default=None)

    p = kinds.add_parser("loops", parents=[common])
    p.add_argument("--project", required=True, help="the directory holding .loops")
    p.add_argument("--name", dest="name", required=True, help="the loop_name")
    p.add_argument("--scope", action="append")
    p.add_argument("--run", type=span, default=(5.0, 10.0))
    p.add_argument("--pause", type=span, default=(1.0, 3.0))
    p.add_argument("--queue", action="store_true")
    p.add_argument("--racy-start", action="store_true")

    p = kinds.add_parser("flock", parents=[common])
    p.add_argument("--lock", required=True, help="the sentinel file")
    p.add_argument("--hold", type=span, default=(2.0, 4.0))
    p.add_argument("--pause", type=span, default=(4.0, 6.0))

    kinds.add_parser("guardian", parents=[common])
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    log = make_log(args.label or args.kind)
    if args.kind == "guardian":
        from lockwatch.demo.guardian import guardian

        return guardian(log)
    life = Life(args.parent if args.parent is not None else os.getppid(), args.pdeathsig)
    rng = random.Random(args.seed if args.seed is not None else int.from_bytes(os.urandom(4)))
    if args.delay and not life.sleep(args.delay):
        return 0
    try:
        return KINDS[args.kind](args, life, log, rng)
    except Exception as exc:
        log(f"crashed: {type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    sys.exit(main())
