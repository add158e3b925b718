"""Memory benchmark: the dashboard's resident memory (RSS) on a large tree, under
an hour-like churn, and on a server with tens of thousands of Postgres locks.

Every scenario runs the dashboard headless (`App.run_test`, 160x50) with its
real feeds in a fresh process, so what is measured is the dashboard alone;
that process reports its RSS (psutil) as it goes and its peak (VmHWM).

  files  a tree of `--files` lock files (the scan benchmark's five formats):
         peak and settled RSS once every lock is on the board and the settling
         rescan is done. Baseline, same run: the dashboard on an empty tree; the
         increment per lock is printed. Target (issue 31, which replaced issue
         15's 150 MB): at most 3 KB a lock above the empty dashboard.
  churn  808 lock files taken, rewritten and released 1,000 times a second
         (benchmarks/churn.py) for `--churn-seconds`: RSS every few seconds, the
         board's events and history (they fill their bounds within about half a
         minute), and the RSS's growth from then on and its slope at the end.
         Target: flat (what an hour adds is that slope times the hour).
  pg     `--pg-locks` session advisory locks held by 50 sessions on a PostgreSQL
         server, polled every 2 s for `--pg-seconds`: RSS after the first poll and
         at the end. Target: < 250 MB at 50,000. The server is a throwaway cluster
         started here (initdb/pg_ctl of the machine's PostgreSQL, as the postgres
         user when root) with room for that many locks, or `--pg-dsn` (its
         max_locks_per_transaction x max_connections must hold them).

    python benchmarks/bench_memory.py --quick        # 20,000 files, 75 s churn, 10,000 pg locks
    python benchmarks/bench_memory.py                # 100,000 files, 120 s churn, 50,000 pg locks
    python benchmarks/bench_memory.py --only churn --churn-seconds 3600   # the hour
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# What a user can rely on, growing no faster than the data (issue 31's decision).
FILES_TARGET_KB_PER_LOCK = 3.0
PG_TARGET_MB = 250.0
CHURN_LOCKS = 808
CHURN_RATE = 1000.0
PG_SESSIONS = 50
SIZE = (160, 50)
HERE = Path(__file__).resolve().parent


# -- in the measured process ---------------------------------------------------------------


def rss_mb() -> float:
    import psutil

    return float(psutil.Process().memory_info().rss) / 2**20


def peak_mb() -> float:
    """VmHWM: the most resident memory this process ever had."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def until(what: str, ready: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def prefetch(feed: Any) -> None:
    """What `SelectedFiles.feeds` does: the first scan starts before the app
    (where the feed can: this benchmark also measures older lockwatches)."""
    start = getattr(feed, "prefetch", None)
    if start is not None:
        start()


async def run_app(feeds: list[Any], body: Callable[[Any], Any]) -> dict[str, Any]:
    from lockwatch.ui.app import LockwatchApp

    app = LockwatchApp(feeds, host=socket.gethostname(), readonly=True)
    async with app.run_test(size=SIZE):
        out: dict[str, Any] = await body(app)
    return out


async def child_files(root: str, expected: int) -> dict[str, Any]:
    from lockwatch.sources.files.watch import FileFeed

    started = rss_mb()
    feed = FileFeed([root], host=socket.gethostname())
    prefetch(feed)

    async def body(app: Any) -> dict[str, Any]:
        begun = time.monotonic()
        await until(
            "every lock",
            lambda: len(app.board) >= expected and bool(app.board.all_statuses()),
            600,
        )
        loaded = time.monotonic() - begun
        at_load = rss_mb()
        samples = []
        for _ in range(20):  # the settling rescan comes a second after the watches are up
            await asyncio.sleep(0.5)
            samples.append(rss_mb())
        return {
            "locks": len(app.board),
            "loaded_s": loaded,
            "before_mb": started,
            "at_load_mb": at_load,
            "settled_mb": samples[-1],
            "peak_mb": peak_mb(),
        }

    return await run_app([feed], body)


async def child_churn(root: str, seconds: float) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from churn import Churn

    from lockwatch.sources.files.watch import FileFeed

    with Churn(Path(root), locks=CHURN_LOCKS, rate=CHURN_RATE) as churn:
        churn.wait_started()
        feed = FileFeed([root], host=socket.gethostname())
        prefetch(feed)

        async def body(app: Any) -> dict[str, Any]:
            await until("the locks", lambda: len(app.board) >= CHURN_LOCKS * 0.5, 120)
            series = []
            start = time.monotonic()
            while (elapsed := time.monotonic() - start) < seconds:
                await asyncio.sleep(min(5.0, max(0.5, seconds / 24)))
                board = app.board
                series.append(
                    (
                        round(time.monotonic() - start, 1),
                        rss_mb(),
                        len(board.events),
                        sum(len(events) for events in board.history.values()),
                        len(board.history),
                    )
                )
            del elapsed
            done = churn.stop()
            return {"series": series, "ops": done, "peak_mb": peak_mb()}

        return await run_app([feed], body)


async def child_pg(dsn: str, locks: int, seconds: float) -> dict[str, Any]:
    from lockwatch.sources.postgres.feed import PgFeed
    from lockwatch.sources.postgres.source import PgSource

    feed = PgFeed(PgSource(dsn), host=socket.gethostname())

    async def body(app: Any) -> dict[str, Any]:
        begun = time.monotonic()
        await until("the pg locks", lambda: len(app.board) >= locks, 300)
        first = time.monotonic() - begun
        at_first = rss_mb()
        series = []
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            await asyncio.sleep(2.0)
            series.append((round(time.monotonic() - start, 1), rss_mb()))
        return {
            "locks": len(app.board),
            "first_poll_s": first,
            "at_first_mb": at_first,
            "series": series,
            "peak_mb": peak_mb(),
        }

    return await run_app([feed], body)


def child_main(argv: list[str]) -> int:
    kind = argv[0]
    if kind == "files":
        out = asyncio.run(child_files(argv[1], int(argv[2])))
    elif kind == "churn":
        out = asyncio.run(child_churn(argv[1], float(argv[2])))
    else:
        out = asyncio.run(child_pg(argv[1], int(argv[2]), float(argv[3])))
    print("RESULT " + json.dumps(out), flush=True)
    return 0


# -- the benchmark ---------------------------------------------------------------------


def measured(*args: str) -> dict[str, Any]:
    """One scenario in a fresh process; what it reported."""
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    raise SystemExit(f"the measured process failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def ls_peak_mb(root: Path) -> float:
    """Peak RSS of a whole `lockwatch ls --json` of the same tree."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lockwatch", "ls", "--json", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, _, usage = os.wait4(proc.pid, 0)
    return float(usage.ru_maxrss) / 1024


def bench_files(workdir: Path, count: int) -> bool:
    sys.path.insert(0, str(HERE))
    from bench_scan import populate

    empty, root = workdir / "empty", workdir / "tree"
    empty.mkdir()
    print(f"files: making {count} lock files ...", flush=True)
    populate(root, count)
    base = measured("files", str(empty), "0")
    full = measured("files", str(root), str(count))
    ls_peak = ls_peak_mb(root)
    per_lock_kb = (full["settled_mb"] - base["settled_mb"]) * 1024 / count
    print(f"files: {full['locks']} locks on the board in {full['loaded_s']:.1f} s")
    print(
        f"  dashboard, empty tree (baseline):  settled {base['settled_mb']:6.1f} MB,"
        f" peak {base['peak_mb']:6.1f} MB"
    )
    print(
        f"  dashboard, {count} locks:        settled {full['settled_mb']:6.1f} MB,"
        f" peak {full['peak_mb']:6.1f} MB (at load {full['at_load_mb']:.1f} MB)"
    )
    print(f"  per lock over the baseline:        {per_lock_kb:6.2f} KB")
    print(f"  lockwatch ls --json, same tree:    peak {ls_peak:6.1f} MB")
    ok = bool(per_lock_kb <= FILES_TARGET_KB_PER_LOCK)
    if count != 100_000:
        at_100k = base["settled_mb"] + per_lock_kb * 100_000 / 1024
        print(f"  at 100,000 locks, by that rate:    about {at_100k:6.1f} MB")
    print(f"  peak / ls --json peak: {full['peak_mb'] / ls_peak:.2f}")
    print(
        f"  target <= {FILES_TARGET_KB_PER_LOCK:.0f} KB a lock over the empty dashboard:"
        f" {'ok' if ok else 'MISSED'}"
    )
    return ok


def slope_mb_per_min(points: list[tuple[float, float]]) -> float:
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def bench_churn(workdir: Path, seconds: float) -> bool:
    out = measured("churn", str(workdir / "churn"), str(seconds))
    series = out["series"]
    print(
        f"churn: {CHURN_LOCKS} locks, {out['ops'] / seconds:.0f} ops/s for {seconds:.0f} s"
        " (time, RSS, events kept, history events kept, locks with a history):"
    )
    for at, rss, events, history, histories in series:
        print(f"  {at:7.1f} s  {rss:6.1f} MB  {events:6d}  {history:7d}  {histories:6d}")
    # The history fills its budget first (about half a minute at 1,000 ops/s): from
    # then on nothing the board keeps grows, and neither may the RSS.
    most = max(s[3] for s in series)
    full = next(i for i, s in enumerate(series) if s[3] == most)
    steady = series[full:]
    if len(steady) < 4:
        print(f"  the history was still filling at {series[-1][0]:.0f} s: run longer")
        return False
    tail = [(s[0], s[1]) for s in steady[len(steady) // 2 :]]
    growth = steady[-1][1] - steady[0][1]
    slope = slope_mb_per_min(tail)
    print(
        f"  history full ({most} events) at {steady[0][0]:.0f} s, RSS {steady[0][1]:.1f} MB;"
        f" at the end {steady[-1][1]:.1f} MB ({growth:+.1f} MB);"
        f" slope over the last {tail[-1][0] - tail[0][0]:.0f} s: {slope:+.2f} MB/min"
    )
    ok = growth <= 3.0 and slope <= 0.5
    print(
        f"  target flat (<= 3 MB after the history is full, <= 0.5 MB/min at the end):"
        f" {'ok' if ok else 'MISSED'}"
    )
    return ok


@contextlib.contextmanager
def throwaway_cluster(workdir: Path, locks: int) -> Iterator[str]:
    """A PostgreSQL cluster of its own, with room for `locks` session locks."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = found[-1] if found else shutil.which("initdb")
    if initdb is None:
        raise SystemExit("no initdb here: pass --pg-dsn")
    bin_dir = Path(initdb).parent
    data = workdir / "pgdata"
    user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: the cluster is the postgres user's
        entry = pwd.getpwnam("postgres")
        workdir.chmod(0o755)
        data.mkdir()
        os.chown(data, entry.pw_uid, entry.pw_gid)
        user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    per_session = -(-locks // PG_SESSIONS)
    subprocess.run(
        [*user, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    options = (
        f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={data}"
        f" -c max_connections={PG_SESSIONS + 20}"
        f" -c max_locks_per_transaction={per_session * 2}"
    )
    # The server's output goes to a log file: it would hold a pipe open for ever.
    subprocess.run(
        [
            *user,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(data / "server.log"),
            "-w",
            "start",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )


def bench_pg(workdir: Path, locks: int, seconds: float, dsn: str | None) -> bool:
    import psycopg

    with contextlib.ExitStack() as stack:
        if dsn is None:
            dsn = stack.enter_context(throwaway_cluster(workdir, locks))
        per_session = -(-locks // PG_SESSIONS)
        sessions = []
        for s in range(PG_SESSIONS):
            conn = psycopg.connect(dsn, autocommit=True, application_name="lockwatch-bench")
            stack.callback(conn.close)
            first = 900_000_000 + s * per_session
            row = conn.execute(
                "SELECT bool_and(pg_try_advisory_lock(k)) FROM generate_series(%s::int8, %s) k",
                (first, min(first + per_session, 900_000_000 + locks) - 1),
            ).fetchone()
            if not (row and row[0]):
                raise SystemExit("some advisory keys are held elsewhere")
            sessions.append(conn)
        out = measured("pg", dsn, str(locks), str(seconds))
    series = out["series"]
    print(
        f"pg: {out['locks']} locks on the board (first poll in {out['first_poll_s']:.1f} s);"
        f" RSS after it {out['at_first_mb']:.1f} MB"
    )
    for at, rss in series:
        print(f"  {at:6.1f} s  {rss:6.1f} MB")
    end = series[-1][1] if series else out["at_first_mb"]
    print(
        f"  at the end {end:.1f} MB ({end - out['at_first_mb']:+.1f} MB since the first poll);"
        f" peak {out['peak_mb']:.1f} MB"
    )
    ok = bool(out["peak_mb"] < PG_TARGET_MB)
    scale = "" if locks >= 50_000 else f" (measured at {locks}: run without --quick)"
    print(f"  target < {PG_TARGET_MB:.0f} MB at 50,000: {'ok' if ok else 'MISSED'}{scale}")
    return ok


def stop(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # so that every cleanup runs


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child_main(sys.argv[2:])
    signal.signal(signal.SIGTERM, stop)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=("files", "churn", "pg"), action="append")
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--churn-seconds", type=float, default=120.0)
    parser.add_argument("--pg-locks", type=int, default=50_000)
    parser.add_argument("--pg-seconds", type=float, default=20.0)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.files, args.churn_seconds, args.pg_locks = 20_000, 75.0, 10_000
    only = set(args.only or ("files", "churn", "pg"))
    workdir = Path(tempfile.mkdtemp(prefix="lockwatch-bench-memory-"))
    results = []
    try:
        if "files" in only:
            results.append(bench_files(workdir, args.files))
        if "churn" in only:
            results.append(bench_churn(workdir, args.churn_seconds))
        if "pg" in only:
            results.append(bench_pg(workdir, args.pg_locks, args.pg_seconds, args.pg_dsn))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("PASS" if all(results) else "FAIL")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
