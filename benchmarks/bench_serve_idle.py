"""Serve idle benchmark: the CPU `lockwatch serve --kernel` takes with 20,000
kernel locks on the host and no client connected (issue 35: it was 61 % of a
core, polling /proc/locks and every holder's fds each second for nobody).

Child processes hold 20,000 flock(2) locks (10,000 files each, as many open
descriptors); serve starts in an empty directory (its file source has nothing
to walk), is waited for until it listens (it does once its first look is
done), left alone a few seconds, then its CPU (user + system, every thread,
from /proc/PID/stat) is sampled over 10 s; a scrape of /v1/locks after
it checks that serve sees every lock. The target is under 5 % of a core.

    python benchmarks/bench_serve_idle.py [--locks 20000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

TARGET_PERCENT = 5.0
PER_PROCESS = 10_000
# After it listens: its first look's last work (the board, the first tick) is done.
SETTLE_S = 5.0

HOLDER = r"""
import fcntl, os, resource, sys
directory, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
fds = []
for n in range(first, first + count):
    fd = os.open(os.path.join(directory, f"held-{n}"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fds.append(fd)
sys.stdout.write("held\n")
sys.stdout.flush()
sys.stdin.read()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU of every thread of `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locks", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()

    files = tempfile.mkdtemp(prefix="lw-bench-flocks-")
    empty = tempfile.mkdtemp(prefix="lw-bench-serve-")
    holders: list[subprocess.Popen[str]] = []
    serve: subprocess.Popen[str] | None = None
    try:
        for first in range(0, args.locks, PER_PROCESS):
            count = min(PER_PROCESS, args.locks - first)
            holder = subprocess.Popen(
                [sys.executable, "-c", HOLDER, files, str(first), str(count)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            holders.append(holder)
        for holder in holders:
            assert holder.stdout is not None
            if holder.stdout.readline() != "held\n":
                sys.exit("a holder could not take its locks")
        port = free_port()
        serve = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lockwatch",
                "serve",
                "--kernel",
                "--listen",
                f"127.0.0.1:{port}",
            ],
            cwd=empty,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert serve.stderr is not None
        started = time.monotonic()
        while "listening on" not in serve.stderr.readline():
            if serve.poll() is not None or time.monotonic() - started > 120:
                sys.exit("lockwatch serve did not start listening")
        print(f"serve listening after {time.monotonic() - started:.1f} s (its first look done)")
        time.sleep(SETTLE_S)
        before, at = cpu_seconds(serve.pid), time.monotonic()
        time.sleep(args.seconds)
        used, took = cpu_seconds(serve.pid) - before, time.monotonic() - at
        # Then one scrape: it saw every lock (and answers at once, woken).
        asked = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/locks", timeout=120) as answer:
            document = json.load(answer)
        answered = time.monotonic() - asked
        ours = sum(1 for lock in document["locks"] if (lock.get("path") or "").startswith(files))
        if ours != args.locks:
            sys.exit(f"serve listed {ours} of the {args.locks} kernel locks")
    finally:
        if serve is not None and serve.poll() is None:
            serve.terminate()
            try:
                serve.wait(timeout=15)
            except subprocess.TimeoutExpired:
                serve.kill()
        for holder in holders:
            holder.kill()
            holder.wait()
        shutil.rmtree(files, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)

    percent = 100.0 * used / took
    print(f"kernel locks: {args.locks:,}; sampled {took:.1f} s with no client")
    print(f"then /v1/locks listed all {ours:,} in {answered:.1f} s (the scrape wakes it)")
    print(f"serve CPU, idle:           {percent:6.2f} % of a core  (target < {TARGET_PERCENT:g} %)")
    print(f"load average at the end:   {os.getloadavg()[0]:6.2f}        (information)")
    ok = percent < TARGET_PERCENT
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
