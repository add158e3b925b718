"""Lock history benchmarks (issue 44), each with its baseline in the same run:

- serve: `lockwatch serve` over 10,000 lock files (bench_scan's tree) while 1,000
  of them change a minute, its CPU over a window with recording (`--history`) and
  without (`--no-history`), alternating rounds; target: the median ratio <= 1.1.
- churn: a day at 1,000 lock changes a minute, through the real Recorder into a
  SQLite file (simulated minutes on a frozen clock: the writer thread does the
  real work; its times carry microseconds, as a real clock's do: a whole second is
  stored in fewer bytes); the store's growth per hour measured, a day's stated;
  target <= 100 MB. Measured (120 minutes): schema 3 101.3 bytes a change, 139 MB a
  day; schema 4 (no digests, times in integer milliseconds) 56.7 bytes a change (the
  span rows 49.4), 78 MB a day. With whole-second times (before): schema 2 171 MB,
  schema 3 117 MB.
- history: `lockwatch history --since -1d --json` over a store of 1,000,000
  recorded intervals (14 days: lock spans, a tenth stale, and wait chains);
  target <= 1 s. Baseline: the same command over an empty store.
- ls-at: `lockwatch ls --at T --json` with 10,000 locks recorded at T; target
  <= 1 s. Baseline: `lockwatch ls --json` over 10,000 lock files.

    python benchmarks/bench_history.py [serve churn history ls-at] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_scan import populate

TICK = os.sysconf("SC_CLK_TCK")
LOCKWATCH = [sys.executable, "-m", "lockwatch"]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def lock_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# --- serve ------------------------------------------------------------------------


def serve_round(tree: Path, history: Path | None, window: float) -> float:
    flags = ["--no-history"] if history is None else ["--history", str(history)]
    serve = subprocess.Popen(
        [*LOCKWATCH, "serve", str(tree), "--listen", "127.0.0.1:0", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert serve.stderr is not None
    line = serve.stderr.readline().decode()
    assert re.search(r"listening on", line), line
    files = lock_files(tree)
    time.sleep(5)  # the first scan settled (and recorded), before the window
    start_cpu, start = cpu_seconds(serve.pid), time.monotonic()
    changed = 0
    # 1,000 changes a minute: a file rewritten every 60 ms (same content, new mtime,
    # alternately touched and rewritten with another pid).
    while time.monotonic() - start < window:
        path = files[changed % len(files)]
        data = path.read_bytes()
        path.write_bytes(data.replace(b'"pid": ', b'"pid":  ') if changed % 2 else data)
        changed += 1
        time.sleep(0.06)
    cpu = cpu_seconds(serve.pid) - start_cpu
    serve.terminate()
    serve.wait(60)
    return cpu


def bench_serve(rounds: int, window: float) -> None:
    work = Path(tempfile.mkdtemp(prefix="lw-bench-history-"))
    try:
        tree = work / "tree"
        populate(tree, 10_000)
        without, with_ = [], []
        for n in range(rounds):
            without.append(serve_round(tree, None, window))
            with_.append(serve_round(tree, work / f"history-{n}.sqlite3", window))
        ratio = statistics.median(with_) / statistics.median(without)
        print(f"serve 10,000 locks, {window:.0f} s at 1,000 changes/min, {rounds} rounds:")
        print(f"  CPU without history: {[round(c, 2) for c in without]} s")
        print(f"  CPU with history:    {[round(c, 2) for c in with_]} s")
        print(f"  median ratio {ratio:.2f} (target <= 1.1)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- a day of churn ------------------------------------------------------------------


def bench_churn(minutes: int) -> None:
    from lockwatch.clock import FrozenClock
    from lockwatch.history.api import open_history
    from lockwatch.history.recorder import Recorder
    from lockwatch.model.board import Board
    from lockwatch.model.changes import ChangeSet, Entry
    from lockwatch.model.lock import Holder, Lock, Reason
    from lockwatch.model.verdict import State, Verdict

    work = Path(tempfile.mkdtemp(prefix="lw-bench-churn-"))
    path = work / "history.sqlite3"
    # A real clock's times carry fractions of a second (a whole-second time is
    # stored in a byte or two, a fraction in eight): started off the second.
    clock = FrozenClock(datetime(2026, 12, 7, 0, 0, 0, 123_457, tzinfo=UTC))
    recorder = Recorder(
        lambda: open_history(str(path), host="bench", write=True),
        poll_seconds=2.0,
        clock=clock,
    )
    board = Board("bench")
    count = 1000

    def entry(n: int, generation: int) -> Entry:
        stale = (n + generation) % 7 == 0
        lock = Lock(
            id=f"file:/srv/locks/project-{n // 20:03d}/job-{n}.lock",
            source="file",
            format="generic",
            name=f"job-{n}",
            path=f"/srv/locks/project-{n // 20:03d}/job-{n}.lock",
            holder=Holder(pid=10_000 + n + generation, host="bench", actor="deploy"),
            acquired_at=clock.now() - timedelta(seconds=n),
            content={"pid": 10_000 + n + generation, "host": "bench", "owner": "deploy"},
            # The file's bytes changed: a new hash (random-looking: it packs badly).
            sha256=hashlib.sha256(f"{n}:{generation}".encode()).hexdigest(),
        )
        reason = (
            Reason("holder_dead", f"pid {10_000 + n + generation} is not running")
            if stale
            else Reason("holder_alive", f"pid {10_000 + n + generation} is running")
        )
        return Entry(lock, Verdict(State.STALE if stale else State.ACTIVE, (reason,), 1.0))

    started = time.monotonic()
    board.apply(
        ChangeSet("files", clock.now(), full=True, upserts=tuple(entry(n, 0) for n in range(count)))
    )
    recorder.observe(board, None, clock.now())
    sizes = []
    for minute in range(1, minutes + 1):
        # 1,000 changes in this minute: 33 lock changes every 2-second poll.
        for poll in range(30):
            # Two seconds a poll, give or take up to a millisecond in microseconds
            # (a real poll's drift): every time off the whole second.
            clock.advance(2.0 + ((minute * 104_729 + poll * 7_919) % 2_001 - 1_000) / 1e6)
            first = (minute * 1000 + poll * 33) % count
            upserts = tuple(entry((first + k) % count, minute * 30 + poll) for k in range(33))
            applied = board.apply(ChangeSet("files", clock.now(), upserts=upserts))
            recorder.observe(board, applied, clock.now())
        # The writer caught up every ten minutes: a simulated minute takes less than
        # a real one, and a writer left MAX_PENDING behind stops recording.
        if minute % 10 == 0:
            recorder.wait_written(recorder.writes + 1, 60)
        if minute % 60 == 0:
            sizes.append(_size(path))
    recorder.close()
    assert recorder.failed is None, recorder.failed
    took = time.monotonic() - started
    # All of it, once the writer caught up (the sizes at each hour miss what it
    # had not written yet): the first hour's one-off rows (each lock's base) too.
    per_hour = _size(path) * 60 / minutes
    print(f"churn: {minutes} simulated minutes at 1,000 lock changes/min ({took:.0f} s)")
    print(f"  store after each hour: {[round(s / 2**20, 1) for s in sizes]} MB (as written then)")
    print(f"  store at the end: {_size(path) / 2**20:.1f} MB")
    print(
        f"  growth {per_hour / 2**20:.1f} MB/hour: a day {24 * per_hour / 2**20:.0f} MB"
        " (target <= 100 MB)"
    )
    _bytes_per_change(path, minutes * 1000)
    shutil.rmtree(work, ignore_errors=True)


def _bytes_per_change(path: Path, changes: int) -> None:
    """Where the bytes go (SQLite's dbstat): each table and index, per change."""
    import sqlite3

    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
    total = sum(size for _, size, _ in rows)
    print(f"  the file: {total / changes:.1f} bytes per change ({changes:,} changes)")
    for name, size, unused in rows[:6]:
        print(f"    {name}: {size / changes:.1f} bytes per change ({unused / size:.0%} unused)")


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


# --- history over 1,000,000 intervals -----------------------------------------------


def build_million(path: Path, total: int) -> datetime:
    """`total` intervals over 14 days: lock spans (a tenth stale), and one wait span
    in 20 in chains of three behind a root. Returns the end of the recorded time."""
    from lockwatch.history.api import Batch, open_history
    from lockwatch.model.changes import Entry
    from lockwatch.model.history import LockSpan, WaitSpan, Who
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import State, Verdict

    store = open_history(str(path), host="bench", write=True)
    end = datetime.now(UTC)
    start = end - timedelta(days=14)
    step = (end - start) / total
    sample = Entry(Lock("file:/x", "file", "generic", "x", "/x"), Verdict(State.ACTIVE))
    batch = Batch()
    for n in range(total):
        at = start + step * n
        if n % 20 == 0:
            root, waiter = f"{n // 60}", f"{n}"
            batch.waits_opened.append(
                WaitSpan(
                    "bench",
                    "postgres",
                    "db1",
                    "public.jobs",
                    "RowExclusiveLock",
                    Who(waiter, pid=n, application="web"),
                    Who(root, pid=n // 60, application="batch", state="idle in transaction"),
                    at,
                    at + timedelta(seconds=5),
                    "acquired",
                )
            )
        else:
            state = "stale" if n % 10 == 1 else "active"
            batch.opened.append(
                (
                    LockSpan(
                        "bench",
                        f"file:/srv/l{n % 5000}",
                        "file",
                        f"l{n % 5000}",
                        f"/srv/l{n % 5000}",
                        state,
                        (),
                        "deploy",
                        at,
                    ),
                    sample,
                )
            )
            batch.closed.append((f"file:/srv/l{n % 5000}", at + timedelta(seconds=30)))
        if len(batch.opened) + len(batch.waits_opened) >= 20_000:
            store.record(batch, poll_seconds=2.0)
            batch = Batch()
    if batch:
        store.record(batch, poll_seconds=2.0)
    store.close()
    return end


CPU_TIMES: list[float] = []  # each `timed` command's median CPU seconds, in order


def timed(args: list[str], rounds: int) -> float:
    """The median wall seconds of `args` (its median CPU seconds: CPU_TIMES)."""
    import resource

    times, cpus = [], []
    for _ in range(rounds):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.monotonic()
        out = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        times.append(time.monotonic() - began)
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime)
        assert out.returncode == 0, out.stderr.decode()
    CPU_TIMES.append(statistics.median(cpus))
    return statistics.median(times)


def bench_history(rounds: int, total: int) -> None:
    from lockwatch.history.api import open_history

    work = Path(tempfile.mkdtemp(prefix="lw-bench-million-"))
    try:
        empty = work / "empty.sqlite3"
        open_history(str(empty), write=True).close()
        full = work / "full.sqlite3"
        began = time.monotonic()
        build_million(full, total)
        print(
            f"history: {total:,} intervals recorded in {time.monotonic() - began:.0f} s,"
            f" {_size(full) / 2**20:.0f} MB"
        )
        base = timed([*LOCKWATCH, "history", "--history", str(empty), "--json"], rounds)
        day = timed([*LOCKWATCH, "history", "--history", str(full), "--json"], rounds)
        print(
            f"  `history --json` (last day): {day:.2f} s wall, {CPU_TIMES[-1]:.2f} s CPU;"
            f" over an empty store {base:.2f} s wall, {CPU_TIMES[-2]:.2f} s CPU (target <= 1 s)"
        )
        store = open_history(str(full))
        began, cpu = time.monotonic(), time.process_time()
        found = store.episodes(datetime.now(UTC) - timedelta(days=1))
        print(
            f"  in-process episodes(): {time.monotonic() - began:.2f} s wall,"
            f" {time.process_time() - cpu:.2f} s CPU, {len(found)} episodes"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- ls --at at 10,000 locks ------------------------------------------------------------


def bench_ls_at(rounds: int) -> None:
    from lockwatch.history.api import open_history

    work = Path(tempfile.mkdtemp(prefix="lw-bench-lsat-"))
    try:
        tree = work / "tree"
        populate(tree, 10_000)
        history = work / "history.sqlite3"
        # Recorded as serve records them: the real file source's scan, judged.
        serve = subprocess.Popen(
            [*LOCKWATCH, "serve", str(tree), "--listen", "127.0.0.1:0", "--history", str(history)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert serve.stderr is not None
        serve.stderr.readline()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(1)
            try:
                store = open_history(str(history))
                count = len(store.lock_spans(None, None))
                store.close()
            except Exception:  # noqa: BLE001 - not made yet
                count = 0
            if count >= 10_000:
                break
        at = datetime.now(UTC).isoformat()
        serve.terminate()
        serve.wait(60)
        base = timed([*LOCKWATCH, "ls", str(tree), "--json"], rounds)
        lsat = timed([*LOCKWATCH, "ls", "--at", at, "--history", str(history), "--json"], rounds)
        print(
            f"ls --at, {count:,} locks recorded: {lsat:.2f} s wall, {CPU_TIMES[-1]:.2f} s CPU"
            f" (target <= 1 s); `ls --json` scanning the same 10,000 files: {base:.2f} s wall,"
            f" {CPU_TIMES[-2]:.2f} s CPU"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("parts", nargs="*", default=["serve", "churn", "history", "ls-at"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--minutes", type=int, default=120)
    parser.add_argument("--intervals", type=int, default=1_000_000)
    args = parser.parse_args()
    if "serve" in args.parts:
        bench_serve(args.rounds, args.window)
    if "churn" in args.parts:
        bench_churn(args.minutes)
    if "history" in args.parts:
        bench_history(args.rounds, args.intervals)
    if "ls-at" in args.parts:
        bench_ls_at(args.rounds)


if __name__ == "__main__":
    main()
