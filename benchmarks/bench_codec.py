"""Recording benchmark: lockwatch's own codec (`lockwatch/model/codec.py`, orjson
underneath) against msgspec, and cattrs + orjson where installed, on one change
set of 50,000 Postgres locks, all in one run.

The change set is what `--record` writes on a big server's first poll: 625
sessions holding 80 advisory locks each, plus sessions waiting on some of them,
as pg_locks and pg_stat_activity rows, made into records by the Postgres
source's own `to_locks` and judged by the board's `judge`, as `PgFeed` does. So
a session's thousands of rows share one PgBackend, Holder and Verdict object,
as they do live, and each lock's `content` is its pg_locks row.

The rivals get the model's dataclasses as they are: msgspec encodes and decodes
(typed, `Decoder(ChangeSet)`) dataclasses, enums, datetimes and tuples natively,
as JSON and as MessagePack; cattrs through its orjson converter. Every side runs
with the garbage collector paused, as the codec pauses it, and the sides
alternate round by round; times are medians, ratios rival/codec (< 1: the rival
is faster or smaller).

Measured for each: encode and decode time, the line's size, the longest time
another thread waits for the GIL meanwhile (the recorder encodes on a thread
beside the dashboard, and a replay decodes on one: a single C call holds the GIL
throughout, while Python code hands it over every 5 ms), and, in a child process
each, the memory the decoded change set's objects take, how much the process
grew by and kept (RSS), and the peak while decoding.
"msgspec.json + interning" is msgspec's decode followed by the pass that would
give back the sharing (equal backends, holders, policies and verdicts made one
object again), to show what it costs.

Checked, not timed: every side gives back an equal change set (and the same
`content` dicts, byte for byte); whether a second encode of what was decoded
gives the same bytes; how many PgBackend objects the decoded value holds (one a
session, 650, when sharing survives); and what each side does with values the recordings must
keep (an infinite ttl, a NaN age, a file name that is not UTF-8, lock file
content nested 300 deep).

    python benchmarks/bench_codec.py [--quick] [--sessions 625] [--per-session 80]
                                     [--rounds 5]

--quick: 5,000 locks and 2 rounds, for a look in a few seconds; the whole run
takes about 2.5 minutes on 2 cores. What the figures decided (issue 15: keep the
codec) and why is written at the top of lockwatch/model/codec.py.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

try:
    import msgspec
except ImportError:
    sys.exit("bench_codec.py measures the codec against msgspec: pip install -e '.[bench]'")

from lockwatch.model import codec
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.sources import recording  # noqa: F401 - registers ChangeSet and Entry
from lockwatch.sources.postgres.facts import PgClient
from lockwatch.sources.postgres.records import to_locks

NOW = datetime(2026, 11, 21, 12, 0, 0, 123456, tzinfo=UTC)
SERVER = "postgresql://monitor@db.internal:5432/app"
# As the poll query builds `target` (lockwatch/sources/postgres/query.py).
TARGET = (
    "locktype", "database", "relation", "page", "tuple", "virtualxid", "transactionid",
    "classid", "objid", "objsubid",
)  # fmt: skip
WAITERS_PER_100 = 4  # waiting sessions per 100 holding ones


# --- the recording --------------------------------------------------------------


def lock_row(pid: int, key: int, *, granted: bool, vxid: str, kinds: str | None) -> dict[str, Any]:
    """One row of the poll's lock statement, with its columns in order."""
    row: dict[str, Any] = {
        "locktype": "advisory", "mode": "ExclusiveLock", "granted": granted, "pid": pid,
        "virtualtransaction": vxid, "target": "", "database": 16384, "database_name": "app",
        "relation": None, "schema_name": None, "relation_name": None, "page": None,
        "tuple": None, "virtualxid": None, "transactionid": None, "classid": key >> 32,
        "objid": key & 0xFFFFFFFF, "objsubid": 1, "object_name": None,
        "wait_age": None if granted else 2.75, "prepared_gid": None, "prepared_owner": None,
        "prepared_age": None, "blocked_by": None, "held_kinds": kinds,
    }  # fmt: skip
    row["target"] = "/".join("" if row[k] is None else str(row[k]) for k in TARGET)
    return row


def session_row(pid: int, n: int, *, waiting: bool) -> dict[str, Any]:
    """One row of the poll's pg_stat_activity statement."""
    idle = not waiting and n % 3 == 0
    query = (
        "SELECT pg_advisory_lock($1)"
        if waiting
        else "SELECT j.id, j.payload FROM jobs AS j WHERE j.queue = $1 AND j.claimed_by IS NULL"
        f" AND pg_try_advisory_lock(j.id) ORDER BY j.priority DESC, j.id LIMIT 80 -- q{n}"
    )
    return {
        "pid": pid, "datname": "app", "usename": f"svc_{n % 7}",
        "application_name": f"worker-{n % 40}", "client": f"10.0.{n % 250}.{n % 200 + 1}",
        "client_port": 40000 + n, "backend_type": "client backend",
        "state": "idle in transaction" if idle else "active",
        "wait_event_type": "Lock" if waiting else ("Client" if idle else None),
        "wait_event": "advisory" if waiting else ("ClientRead" if idle else None),
        "query": query, "xact_age": 12.5 + n % 300, "query_age": 3.25,
        "state_age": 1.5 + n % 90, "backend_age": 3600.0 + n,
        "backend_started": NOW - timedelta(seconds=3600 + n),
    }  # fmt: skip


def pg_change_set(sessions: int, per_session: int) -> ChangeSet:
    """The change set a Postgres feed emits for its first poll of such a server."""
    rows: list[dict[str, Any]] = []
    activity: dict[int, dict[str, Any]] = {}
    for n in range(sessions):
        pid = 10_000 + n
        activity[pid] = session_row(pid, n, waiting=False)
        kinds = f"advisory={per_session},virtualxid=1"
        for i in range(per_session):
            key = n * per_session + i
            rows.append(lock_row(pid, key, granted=True, vxid=f"{n + 3}/{key}", kinds=kinds))
    for w in range(sessions * WAITERS_PER_100 // 100):
        pid, holder = 60_000 + w, 10_000 + w * 25 % sessions
        activity[pid] = session_row(pid, w, waiting=True)
        key = (holder - 10_000) * per_session + w % per_session
        row = lock_row(pid, key, granted=False, vxid=f"{w + 9000}/1", kinds=None)
        row["blocked_by"] = [holder]
        rows.append(row)
    rows.sort(key=lambda row: row["pid"])  # as the query orders them
    # Client processes found on this host for some sessions (the rest: another host).
    clients = {
        10_000 + n: PgClient(30_000 + n, ("python", "-m", "worker", f"--queue=q{n}"))
        for n in range(0, sessions, 5)
    }
    locks = to_locks(rows, activity, server=SERVER, polled_at=NOW, idle_after=60.0, clients=clients)
    entries = judge(locks, StaticProcesses(), NOW, "monitor-host")
    status = SourceStatus("postgres", SERVER, "connected", updated_at=NOW)
    return ChangeSet(f"pg:{SERVER}", NOW, (status,), upserts=tuple(entries))


# --- the sides ------------------------------------------------------------------


@contextmanager
def collector_paused() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass(frozen=True)
class Side:
    name: str
    encode: Callable[[ChangeSet], bytes]
    decode: Callable[[bytes], Any]


def _paused(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def run(value: Any) -> Any:
        with collector_paused():
            return fn(value)

    return run


def intern_shared(change: ChangeSet) -> ChangeSet:
    """Equal backends, holders, policies, verdicts and process facts made one object
    again (what the codec's references give for free). The objects are fresh
    from the decoder and seen by nobody yet, so they are set in place."""
    seen: dict[Any, Any] = {}
    one = seen.setdefault
    put = object.__setattr__
    for entry in change.upserts:
        lock = entry.lock
        put(lock, "holder", one(lock.holder, lock.holder))
        put(lock, "policy", one(lock.policy, lock.policy))
        pg = lock.pg
        if pg is not None:
            put(pg, "backend", one(pg.backend, pg.backend))
        put(entry, "verdict", one(entry.verdict, entry.verdict))
        if entry.facts is not None:
            put(entry, "facts", one(entry.facts, entry.facts))
    return change


def sides() -> list[Side]:
    json_encoder = msgspec.json.Encoder()
    json_decoder = msgspec.json.Decoder(ChangeSet)
    pack_encoder = msgspec.msgpack.Encoder()
    pack_decoder = msgspec.msgpack.Decoder(ChangeSet)
    found = [
        Side("codec (ours)", codec.dumps_line, codec.loads_line),
        Side(
            "msgspec.json",
            _paused(lambda c: json_encoder.encode(c) + b"\n"),
            _paused(json_decoder.decode),
        ),
        Side(
            "msgspec.json + interning",
            _paused(lambda c: json_encoder.encode(c) + b"\n"),
            _paused(lambda line: intern_shared(json_decoder.decode(line))),
        ),
        Side("msgspec.msgpack", _paused(pack_encoder.encode), _paused(pack_decoder.decode)),
    ]
    try:
        from cattrs.preconf.orjson import make_converter
    except ImportError:
        print("(cattrs is not installed: `pip install cattrs` to measure cattrs + orjson too)")
    else:
        converter = make_converter()
        found.append(
            Side(
                "cattrs + orjson",
                _paused(converter.dumps),
                _paused(lambda line: converter.loads(line, ChangeSet)),
            )
        )
    return found


# --- measuring ------------------------------------------------------------------


class GilWatch:
    """A thread that asks for the GIL every millisecond and keeps the longest
    wait: what the dashboard's event loop would feel meanwhile."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            last = now

    def __enter__(self) -> GilWatch:
        self._thread.start()
        time.sleep(0.02)
        self.longest = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def timed(fn: Callable[[Any], Any], arg: Any) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    result = fn(arg)
    return time.perf_counter() - start, result


def backends(value: ChangeSet) -> int:
    return len({id(e.lock.pg.backend) for e in value.upserts if e.lock.pg is not None})


def same_change_set(a: ChangeSet, b: Any) -> bool:
    """Equal, and every lock's content too (Lock leaves it out of ==)."""
    if not isinstance(b, ChangeSet) or a != b:
        return False
    mine = [e.lock.content for e in a.upserts]
    theirs = [e.lock.content for e in b.upserts]
    return mine == theirs and orjson.dumps(mine) == orjson.dumps(theirs)


def edge_cases(side: Side) -> dict[str, str]:
    """What a side does with values a recording must keep."""
    base = Lock("file:/srv/x.lock", "file", "generic", "x", "/srv/x.lock")
    deep: Any = {"leaf": 1}
    for _ in range(300):
        deep = [deep]
    name = "caf\udce9.lock"  # a file name that is not UTF-8, as os.fsdecode gives it
    cases = {
        "infinite ttl": Entry(Lock(**{**_fields(base), "ttl_seconds": math.inf}), _verdict()),
        "NaN age": Entry(base, _verdict(age_seconds=math.nan)),
        "non-UTF-8 name": Entry(Lock(**{**_fields(base), "name": name, "path": name}), _verdict()),
        "content 300 deep": Entry(Lock(**{**_fields(base), "content": deep}), _verdict()),
    }
    out: dict[str, str] = {}
    for label, entry in cases.items():
        change = ChangeSet("f", NOW, upserts=(entry,))
        try:
            back = side.decode(side.encode(change))
        except (Exception, RecursionError) as err:  # noqa: BLE001 - reported, not raised
            out[label] = f"fails ({type(err).__name__})"
            continue
        got, want = back.upserts[0], entry
        kept = _same_float(got.lock.ttl_seconds, want.lock.ttl_seconds) and _same_float(
            got.verdict.age_seconds, want.verdict.age_seconds
        )
        kept = kept and got.lock.name == want.lock.name
        kept = kept and got.lock.content == want.lock.content  # 300 deep: too deep for orjson
        out[label] = "kept" if kept else "changed"
    return out


def _fields(lock: Lock) -> dict[str, Any]:
    return {name: getattr(lock, name) for name in lock.__dataclass_fields__}


def _verdict(**changes: Any) -> Any:
    from lockwatch.model.verdict import State, Verdict

    return Verdict(State.ACTIVE, **changes)


def _same_float(a: float | None, b: float | None) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def child_memory(side_name: str, path: Path) -> dict[str, float]:
    """In a fresh process: what decoding the line keeps, and its peak, in MB."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", side_name, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _status_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (the peak) of this process, from /proc: unlike
    getrusage's ru_maxrss, which a child inherits from its parent, VmHWM is this
    program's own."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1e3
    raise RuntimeError(f"no {field} in /proc/self/status")


def run_child(side_name: str, path: Path) -> None:
    side = next(s for s in sides() if s.name == side_name)
    line = path.read_bytes()
    gc.collect()
    before = _status_mb("VmRSS")
    value = side.decode(line)
    gc.collect()
    held = _status_mb("VmRSS") - before
    # The process's peak above where it stood: reading the line came last before.
    peak = max(_status_mb("VmHWM") - before, held)
    # RSS keeps what the allocator has not given back (a parsed tree, freed, can
    # leave its arenas behind): what the decoded objects themselves hold, apart.
    del value
    gc.collect()
    tracemalloc.start()
    value = side.decode(line)
    gc.collect()
    objects = tracemalloc.get_traced_memory()[0] / 1e6
    tracemalloc.stop()
    assert len(value.upserts) > 0
    print(json.dumps({"held": held, "peak": peak, "objects": objects}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="5,000 locks, 2 rounds")
    parser.add_argument("--sessions", type=int, default=625)
    parser.add_argument("--per-session", type=int, default=80)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child[0], Path(args.child[1]))
        return
    if args.quick:
        args.sessions, args.rounds = 62, 2

    started = time.perf_counter()
    change = pg_change_set(args.sessions, args.per_session)
    print(
        f"{len(change.upserts):,} Postgres locks ({args.sessions} sessions x"
        f" {args.per_session} advisory locks, plus waiters), {backends(change)} PgBackend"
        f" objects; built in {time.perf_counter() - started:.1f} s"
    )
    everyone = sides()
    lines: dict[str, bytes] = {}
    enc: dict[str, list[float]] = {s.name: [] for s in everyone}
    dec: dict[str, list[float]] = {s.name: [] for s in everyone}
    for _ in range(args.rounds):
        for side in everyone:
            seconds, line = timed(side.encode, change)
            enc[side.name].append(seconds)
            lines[side.name] = line
            seconds, back = timed(side.decode, line)
            dec[side.name].append(seconds)
            del back

    print("\nround trips (not timed):")
    for side in everyone:
        back = side.decode(lines[side.name])
        again = side.encode(back) == lines[side.name]
        print(
            f"  {side.name:<25} equal value: {same_change_set(change, back)!s:<5}"
            f"  same bytes again: {again!s:<5}  PgBackend objects: {backends(back):,}"
        )
        del back

    print("\nGIL held the longest at a time (another thread's wait):")
    for side in everyone:
        with GilWatch() as enc_watch:
            side.encode(change)
        with GilWatch() as dec_watch:
            side.decode(lines[side.name])
        print(
            f"  {side.name:<25} encode {enc_watch.longest * 1e3:6.0f} ms"
            f"   decode {dec_watch.longest * 1e3:6.0f} ms"
        )

    memory: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side in everyone:
            path = Path(tmp) / "line"
            path.write_bytes(lines[side.name])
            memory[side.name] = child_memory(side.name, path)

    base = everyone[0].name
    med_enc = {name: statistics.median(v) for name, v in enc.items()}
    med_dec = {name: statistics.median(v) for name, v in dec.items()}
    print(f"\nmedians of {args.rounds} rounds; ratio = side / {base}:")
    print(
        f"  {'side':<25} {'encode':>9} {'ratio':>6} {'decode':>9} {'ratio':>6}"
        f" {'size':>9} {'ratio':>6} {'objects':>8} {'RSS':>8} {'peak':>8}"
    )
    for side in everyone:
        name = side.name
        size = len(lines[name])
        print(
            f"  {name:<25} {med_enc[name] * 1e3:6.0f} ms {med_enc[name] / med_enc[base]:6.2f}"
            f" {med_dec[name] * 1e3:6.0f} ms {med_dec[name] / med_dec[base]:6.2f}"
            f" {size / 1e6:6.1f} MB {size / len(lines[base]):6.2f}"
            f" {memory[name]['objects']:5.0f} MB {memory[name]['held']:5.0f} MB"
            f" {memory[name]['peak']:5.0f} MB"
        )
    print(
        "  (objects: what the decoded change set's objects take; RSS: what the process"
        " grew by and kept;\n   peak: the most it grew by while decoding)"
    )

    print("\nvalues a recording must keep:")
    for side in everyone:
        cases = edge_cases(side)
        print(f"  {side.name:<25} " + ", ".join(f"{k}: {v}" for k, v in cases.items()))


if __name__ == "__main__":
    main()
