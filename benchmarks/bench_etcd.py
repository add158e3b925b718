"""etcd benchmark: one poll of lockwatch's etcd source on a server holding 10,000
lock keys, each on a lease of its own (etcdctl-style mutex keys
`/locks/job-N/<lease hex>` and python-etcd3-style `/locks/app-N`), against a
bare poller making the calls issue 35 names as the floor: one range over the
prefix and one listing of the leases (`/v3/lease/leases`), parsed into keys
and lease ids by lockwatch's gateway code, nothing kept between polls.

lockwatch's poll is what the dashboard does every --refresh seconds: its reads
(after the first poll's whole range, what changed since: etcd/since.py; beside
them the time to live of a capped batch of leases, on a few connections; no
lease listing, which the keys make needless), its lock records, and their
verdicts. Both run in this process on their own connections, alternating (who
goes first rotates), after one poll that warms them. The targets (issue 35): a
median whole poll of at most 1 s, and a median ratio of the whole poll to the
bare poller's of at most 1.5. The ratio of lockwatch's reads alone is printed
for information.

The bare poller is stateless, and lockwatch's reads after the first are not
(they need what the last poll read): `--churn N` deletes N lock keys and puts
N new ones, each on a new lease, before every round (releases and
acquisitions between two polls, outside the timings), so that each lockwatch
poll has keys to find gone, new leases to read, records to make anew; the
same targets hold up to since.GONE (200) keys gone a poll; past that a poll
reads the prefix whole again (`--churn 300`), which only the 1 s target holds.

The server is a throwaway etcd on free loopback ports, its data in a temporary
directory, killed at exit.

    python benchmarks/bench_etcd.py [--rounds 9] [--leases 10000] [--churn 0]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx

RATIO_TARGET = 1.5
POLL_TARGET_S = 1.0
TTL = 3600  # the leases outlive the run


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def throwaway_etcd() -> Iterator[str]:
    binary = shutil.which("etcd")
    if binary is None:
        sys.exit("etcd is not installed (apt-get install etcd-server)")
    workdir = tempfile.mkdtemp(prefix="lw-bench-etcd-")
    client, peer = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [
            *(binary, "--name=lw", f"--data-dir={workdir}/data"),
            *(f"--listen-client-urls={client}", f"--advertise-client-urls={client}"),
            *(f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}"),
            *(f"--initial-cluster=lw={peer}", "--log-level=error"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{client}/health", timeout=0.5).json().get("health") == "true":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                sys.exit("etcd did not start")
            time.sleep(0.05)
        yield client
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def fill(url: str, count: int) -> None:
    """`count` leases, each with one lock key on it."""
    from lockwatch.sources.etcd.gateway import encode

    def one(chunk: range) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            for number in chunk:
                lease = int(client.post("/v3/lease/grant", json={"TTL": TTL}).json()["ID"])
                key = f"/locks/job-{number}/{lease:x}" if number % 2 else f"/locks/app-{number}"
                body = {"key": encode(key), "value": encode(f"worker-{number}"), "lease": lease}
                client.post("/v3/kv/put", json=body).raise_for_status()

    workers = 48  # etcd syncs each write: many at once share its fsyncs
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, [range(w, count, workers) for w in range(workers)]))


def churn(client: httpx.Client, keys: list[str], count: int, round_: int) -> None:
    """Release `count` of `keys`, anywhere among them (a fixed seed), and acquire
    as many new ones."""
    from lockwatch.sources.etcd.gateway import encode

    chance = random.Random(round_)
    for _ in range(count):
        gone = {"key": encode(keys.pop(chance.randrange(len(keys))))}
        client.post("/v3/kv/deleterange", json=gone).raise_for_status()
    for number in range(count):
        lease = int(client.post("/v3/lease/grant", json={"TTL": TTL}).json()["ID"])
        key = f"/locks/churn-{round_}-{number}/{lease:x}"
        body = {"key": encode(key), "value": encode("churner"), "lease": lease}
        client.post("/v3/kv/put", json=body).raise_for_status()
        keys.append(key)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--leases", type=int, default=10_000)
    parser.add_argument("--churn", type=int, default=0, metavar="N")
    args = parser.parse_args()

    from lockwatch.clock import SystemClock
    from lockwatch.model.changes import judge
    from lockwatch.model.process import StaticProcesses
    from lockwatch.sources.etcd.endpoint import parse
    from lockwatch.sources.etcd.gateway import Gateway
    from lockwatch.sources.etcd.plugin import DEFAULT_PREFIXES
    from lockwatch.sources.etcd.poller import EtcdPoller
    from lockwatch.sources.etcd.server import MAX_KEYS, EtcdServer, EtcdSnapshot

    with throwaway_etcd() as url:
        started = time.perf_counter()
        fill(url, args.leases)
        took = time.perf_counter() - started
        print(f"granted {args.leases:,} leases with a key each in {took:.1f} s")
        endpoint = parse(url)
        server = EtcdServer(endpoint, DEFAULT_PREFIXES, clock=SystemClock())
        poller = EtcdPoller(server)
        bare = Gateway(endpoint)
        reads: list[float] = []
        server_poll = server.poll

        def timed_reads() -> EtcdSnapshot | None:
            started = time.perf_counter()
            try:
                return server_poll()
            finally:
                reads.append(time.perf_counter() - started)

        server.poll = timed_reads  # type: ignore[method-assign]

        def lockwatch_poll() -> int:
            polled = poller.poll()
            assert polled.locks is not None, server.status
            return len(judge(polled.locks, StaticProcesses(), polled.at, "bench"))

        def bare_poll() -> int:
            found = 0
            for prefix in DEFAULT_PREFIXES:
                found += len(bare.range_prefix(prefix, MAX_KEYS)[1])
            bare.call("/lease/leases", {})
            return found

        seen, keys = lockwatch_poll(), bare_poll()  # warm both connections
        reads.clear()
        if seen != args.leases or keys != args.leases:
            print(f"lockwatch saw {seen} locks, the bare poller {keys} keys", file=sys.stderr)
            return 1
        times: dict[str, list[float]] = {"lw": [], "bare": []}
        runs = {"lw": lockwatch_poll, "bare": bare_poll}
        writer = httpx.Client(base_url=url, timeout=30)
        held = [kv.key for kv in bare.range_prefix("/locks/", MAX_KEYS)[1]]
        for number in range(args.rounds):
            if args.churn:
                churn(writer, held, args.churn, number)
            order = list(runs)[number % 2 :] + list(runs)[: number % 2]
            for label in order:
                started = time.perf_counter()
                runs[label]()
                times[label].append(time.perf_counter() - started)
        poller.close()
        bare.close()
        writer.close()
    lw_times, bare_times = times["lw"], times["bare"]

    ratio = statistics.median(a / b for a, b in zip(reads, bare_times, strict=True))
    whole = statistics.median(a / b for a, b in zip(lw_times, bare_times, strict=True))
    poll = statistics.median(lw_times)
    churned = f"; churn: {args.churn} keys a round" if args.churn else ""
    print(f"leases: {args.leases:,}, one lock key each; rounds: {args.rounds}{churned}")
    for label, measured in (
        ("bare range + lease listing", bare_times),
        ("lockwatch's reads (keys, leases)", reads),
        ("lockwatch poll (records, verdicts)", lw_times),
    ):
        median, fastest = statistics.median(measured) * 1000, min(measured) * 1000
        print(f"{label + ':':37s}median {median:8.1f} ms  (min {fastest:.1f})")
    print(f"lockwatch poll, median:              {poll:8.2f} s    (target <= {POLL_TARGET_S:g} s)")
    print(f"ratio of the whole poll, median:     {whole:8.2f}     (target <= {RATIO_TARGET})")
    print(f"ratio of the reads, median:          {ratio:8.2f}     (information)")
    spread = sorted(a / b for a, b in zip(lw_times, bare_times, strict=True))
    print(f"whole-poll ratios, lowest to highest: {' '.join(f'{r:.2f}' for r in spread)}")
    print(f"load average at the end:             {os.getloadavg()[0]:8.2f}     (information)")
    ok = whole <= RATIO_TARGET and poll <= POLL_TARGET_S
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
