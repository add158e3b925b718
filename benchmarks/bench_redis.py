"""Redis benchmark: one poll of lockwatch's redis source on a server holding 10,000
lock keys (python-redis-lock, Redlock, redis-py and hand-made ones) among
1,000,000 other keys, against a bare poller that SCANs the same patterns and
reads each key's PTTL in one pipeline.

lockwatch's poll is what the dashboard does every --refresh seconds: SCAN over
the patterns (one walk of the keyspace, as they share the run `lock`), GET +
PTTL of every key found (pipelined), CLIENT LIST for waiters, then lock
records, formats and verdicts. For information it is also timed against a bare
poller that walks once the same way. Both run in this process on
their own connection, alternating, in one run; the target (issue 16) is a
median ratio of at most 1.5.

The server is a throwaway redis-server on a free loopback port (nothing saved
to disk), filled with DEBUG POPULATE and a pipeline, and killed at exit.

    python benchmarks/bench_redis.py [--rounds 7] [--others 1000000] [--locks 10000]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis

RATIO_TARGET = 1.5
SCAN_COUNT = 1000  # the same COUNT lockwatch asks for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def throwaway_server() -> Iterator[int]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="lw-bench-redis-")
    process = subprocess.Popen(
        [
            *(binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"),
            *("no", "--dir", workdir, "--enable-debug-command", "local"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=port).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    sys.exit("redis-server did not start")
                time.sleep(0.05)
        yield port
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def fill(client: redis.Redis, others: int, locks: int) -> None:
    """`others` keys no pattern matches (key:0 ...), and `locks` lock keys in the
    shapes the libraries write, most with a TTL."""
    try:
        client.execute_command("DEBUG", "POPULATE", others, "key", 16)
    except redis.ResponseError:  # DEBUG disabled: a pipeline does it, slower
        pipe = client.pipeline(transaction=False)
        for number in range(others):
            pipe.set(f"key:{number}", "x" * 16)
            if number % 10_000 == 9_999:
                pipe.execute()
        pipe.execute()
    pipe = client.pipeline(transaction=False)
    for number in range(locks):
        kind = number % 10
        if kind < 4:  # python-redis-lock
            pipe.set(f"lock:job-{number}", uuid.uuid4().hex[:24], ex=600)
        elif kind < 7:  # pottery's Redlock
            pipe.set(f"redlock:task-{number}", str(uuid.uuid4()), px=600_000)
        elif kind < 9:  # redis-py's Lock
            pipe.set(f"deploy-{number}.lock", uuid.uuid1().hex, px=600_000)
        else:  # hand-made, no TTL
            pipe.set(f"cron-{number}:lock", "host-7")
    pipe.execute()


def bare_poll(client: redis.Redis, patterns: tuple[str, ...], one_walk: bool = False) -> int:
    """The baseline: SCAN every pattern, then every key's PTTL in one pipeline.
    `one_walk`: walk the keyspace once, as lockwatch does (for information)."""
    from lockwatch.sources.redis.patterns import scan_plan

    walks = scan_plan(patterns) if one_walk else [(pattern, None) for pattern in patterns]
    found: dict[bytes, None] = {}
    for pattern, check in walks:
        for key in client.scan_iter(match=pattern, count=SCAN_COUNT):
            if check is None or check(key):
                found[key] = None
    pipe = client.pipeline(transaction=False)
    for key in found:
        pipe.pttl(key)
    return len(pipe.execute())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--others", type=int, default=1_000_000)
    parser.add_argument("--locks", type=int, default=10_000)
    args = parser.parse_args()

    from lockwatch.clock import SystemClock
    from lockwatch.model.changes import judge
    from lockwatch.model.process import StaticProcesses
    from lockwatch.sources.redis.endpoint import parse
    from lockwatch.sources.redis.plugin import DEFAULT_PATTERNS
    from lockwatch.sources.redis.poll import RedisPoller

    with throwaway_server() as port:
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)
        started = time.perf_counter()
        fill(client, args.others, args.locks)
        print(f"filled {client.dbsize():,} keys in {time.perf_counter() - started:.1f} s")

        poller = RedisPoller.of((parse(url, {}),), DEFAULT_PATTERNS, SystemClock())
        bare = redis.Redis.from_url(url)

        def lockwatch_poll() -> int:
            polled = poller.poll()
            assert polled.locks is not None, polled.statuses
            entries = judge(polled.locks, StaticProcesses(), polled.at, "bench")
            return len(entries)

        seen = lockwatch_poll()  # warm both connections
        keys = bare_poll(bare, DEFAULT_PATTERNS)
        if seen != args.locks or keys != args.locks:
            print(f"lockwatch saw {seen} locks, the bare poller {keys} keys", file=sys.stderr)
            return 1
        times: dict[str, list[float]] = {"lw": [], "bare": [], "once": []}
        runs = {
            "lw": lockwatch_poll,
            "bare": lambda: bare_poll(bare, DEFAULT_PATTERNS),
            "once": lambda: bare_poll(bare, DEFAULT_PATTERNS, one_walk=True),
        }
        for number in range(args.rounds):
            # Rotate who goes first: none always gets the warmer server.
            order = list(runs)[number % 3 :] + list(runs)[: number % 3]
            for label in order:
                started = time.perf_counter()
                runs[label]()
                times[label].append(time.perf_counter() - started)
        poller.close()
    lw_times, bare_times = times["lw"], times["bare"]

    ratio = statistics.median(a / b for a, b in zip(lw_times, bare_times, strict=True))
    print(f"lock keys: {args.locks:,} among {args.others:,} others; patterns: {DEFAULT_PATTERNS}")
    print(f"rounds: {args.rounds}")
    for label, measured in (
        ("lockwatch poll (records, verdicts)", lw_times),
        ("bare SCAN + PTTL, per pattern", bare_times),
        ("bare, one walk as lockwatch does", times["once"]),
    ):
        median, fastest = statistics.median(measured) * 1000, min(measured) * 1000
        print(f"{label + ':':37s}median {median:8.1f} ms  (min {fastest:.1f})")
    print(f"ratio, median of rounds:             {ratio:8.2f}     (target <= {RATIO_TARGET})")
    # What lockwatch adds to the same single walk: values, CLIENT LIST, records, verdicts.
    overhead = statistics.median(a / b for a, b in zip(lw_times, times["once"], strict=True))
    print(f"ratio to the one-walk poller:        {overhead:8.2f}     (information)")
    ok = ratio <= RATIO_TARGET
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
