"""Serve benchmark: what one Prometheus scrape of `lockwatch serve` costs the
server, while it watches 10,000 lock files of mixed formats (the scan benchmark's
tree: most of them stale, so the series cap is exercised too).

The scrapes go over one kept-alive connection, as Prometheus makes them, and
the listener's threads (its event loop and workers, named lockwatch-http)
answer them: their CPU time (from /proc/<pid>/task/<tid>/stat) is the scrapes'
cost, apart from the watching the server does meanwhile. As a cross-check, the
whole server's CPU over a window of scrapes is compared with an idle window of
the same length, alternating.

Baseline, in the same run: the CPU of one `lockwatch ls --json` over the same
tree (what an exporter that collected at each scrape would pay). Target (issue
17): a scrape costs at most 50 ms of the server's CPU.

    python benchmarks/bench_serve.py [--files 10000] [--rounds 7] [--scrapes 40]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scan import populate

TARGET_MS = 50.0
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(stat_path: str) -> float:
    """utime + stime of a process or thread, from its /proc stat file."""
    with open(stat_path) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def tasks(pid: int) -> set[str]:
    return set(os.listdir(f"/proc/{pid}/task"))


def listener_threads(pid: int) -> list[str]:
    """The listener's event loop and workers (named lockwatch-http)."""
    found = []
    for tid in sorted(tasks(pid)):
        with open(f"/proc/{pid}/task/{tid}/comm") as handle:
            if handle.read().strip() == "lockwatch-http":
                found.append(tid)
    return found


class Server:
    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lockwatch", "serve", str(root), "--listen", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url: str | None = None
        self._lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._lines.append(line)
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                self.url = found.group(1)

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit("lockwatch serve exited: " + "".join(self._lines))
            if self.url is not None:
                try:
                    seen = len(httpx.get(f"{self.url}/v1/locks", timeout=30).json()["locks"])
                except httpx.HTTPError:
                    seen = -1
                if seen == count:
                    return
            time.sleep(0.5)
        raise SystemExit(f"lockwatch serve did not list {count} locks in time")

    @property
    def cpu(self) -> float:
        return cpu_seconds(f"/proc/{self.process.pid}/stat")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def scrape_window(
    server: Server, scrapes: int, window: float, path: str, churn: Path | None = None
) -> tuple[float, float]:
    """`scrapes` scrapes spread over `window` seconds on one connection: the
    listener threads' CPU per scrape, and the whole server's CPU in the window.
    `churn`: a lock file rewritten before each scrape, so that every scrape finds
    the board changed (nothing counted before can be reused)."""
    assert server.url is not None
    pid = server.process.pid
    with httpx.Client(base_url=server.url, headers={"Accept-Encoding": "gzip"}) as client:
        client.get(path).raise_for_status()  # the connection
        handler = listener_threads(pid)
        if not handler:
            raise SystemExit("could not find the listener's threads")
        stats = [f"/proc/{pid}/task/{tid}/stat" for tid in handler]
        thread_start = sum(cpu_seconds(stat) for stat in stats)
        process_start = server.cpu
        start = time.monotonic()
        for n in range(scrapes):
            if churn is not None:
                churn.write_text(f"{os.getpid() if n % 2 else 4_000_001}\n")
                time.sleep(window / scrapes / 2)  # the watcher's debounce, then the scrape
            client.get(path).raise_for_status()
            pause = start + (n + 1) * window / scrapes - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        thread_cpu = sum(cpu_seconds(stat) for stat in stats) - thread_start
        process_cpu = server.cpu - process_start
    return thread_cpu / scrapes, process_cpu


def idle_window(server: Server, window: float) -> float:
    start = server.cpu
    time.sleep(window)
    return server.cpu - start


def ls_cpu(root: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", str(root)],
        stdout=subprocess.DEVNULL,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def check_metrics(server: Server, files: int) -> str:
    from prometheus_client.parser import text_string_to_metric_families

    assert server.url is not None
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    values: dict[str, float] = {}
    series: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series[sample.name] = series.get(sample.name, 0) + 1
            if sample.name == "lockwatch_locks":
                values["locks"] = values.get("locks", 0) + sample.value
                if sample.labels.get("state") == "stale":
                    values["stale"] = sample.value
            elif sample.name == "lockwatch_lock_series_dropped":
                values["dropped"] = sample.value
    if values.get("locks") != files:
        raise SystemExit(f"lockwatch_locks adds up to {values.get('locks')}, not {files}")
    kept = series.get("lockwatch_lock_stale", 0)
    total = sum(series.values())
    return (
        f"{total} samples: {kept} stale-lock series of {values['stale']:.0f} stale locks"
        f" (lockwatch_lock_series_dropped {values['dropped']:.0f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--scrapes", type=int, default=40, help="scrapes per round")
    parser.add_argument("--window", type=float, default=4.0, help="seconds per window")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="lockwatch-bench-serve-"))
    server = None
    try:
        populate(workdir, args.files)
        baseline = [ls_cpu(workdir) for _ in range(3)]
        server = Server(workdir)
        server.wait_for(args.files)
        shape = check_metrics(server, args.files)
        per_scrape, differential, per_document, changing = [], [], [], []
        churn = workdir / "churn" / "churn.pid"
        churn.parent.mkdir()
        for _ in range(args.rounds):
            thread, busy = scrape_window(server, args.scrapes, args.window, "/metrics")
            idle = idle_window(server, args.window)
            per_scrape.append(thread)
            differential.append((busy - idle) / args.scrapes)
        for _ in range(3):
            changing.append(
                scrape_window(server, args.scrapes // 2, args.window, "/metrics", churn)[0]
            )
        for _ in range(3):
            # Past the serve's one-second reuse of a rendering: each one rendered anew.
            per_document.append(scrape_window(server, 3, 4.5, "/v1/locks")[0])
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    scrape_ms = statistics.median(per_scrape) * 1000
    cross_ms = statistics.median(differential) * 1000
    ls_ms = statistics.median(baseline) * 1000
    document_ms = statistics.median(per_document) * 1000
    changing_ms = statistics.median(changing) * 1000
    print(f"locks watched: {args.files}; /metrics: {shape}")
    print(f"rounds: {args.rounds} x {args.scrapes} scrapes over {args.window:g} s, one connection")
    print(f"/metrics, listener CPU per scrape:   {scrape_ms:7.2f} ms  (target <= {TARGET_MS:g})")
    print(f"/metrics, server CPU per scrape vs idle:   {cross_ms:7.2f} ms  (cross-check)")
    print(f"/metrics, board changed before each:      {changing_ms:7.2f} ms  (target <= 50)")
    print(f"/v1/locks, listener CPU per request: {document_ms:7.2f} ms")
    print(f"baseline: one `lockwatch ls --json` (CPU):  {ls_ms:7.2f} ms")
    print(f"ratio scrape / ls --json:                  {scrape_ms / ls_ms:7.3f}")
    ok = scrape_ms <= TARGET_MS and changing_ms <= TARGET_MS
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
