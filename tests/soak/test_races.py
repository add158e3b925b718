"""Action races, round after round: two breakers on one lock, a break against the
lock being taken again, a steal against a heartbeat, and a break while the lock's
directory is swapped for a symlink and back.

Every racer is a process of its own (tests/soak/racers.py), released with the
other at a barrier, and lockwatch acts as the CLI and the dashboard do (the
Executor: judge again, audit the intent, compare-and-swap, audit the result).
What must hold in every round:

- exactly one of two breakers wins, and the loser is refused, never failed;
- no compare-and-swap violation: a tombstone only ever holds the bytes the
  operator saw, and a lock written by its holder (atomically) is never lost;
- nothing is ever done outside the lock's own directory;
- the shared audit log verifies, every intent with its result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions.audit import INTENT, read_records, verify
from lockwatch.sources.files.tombstones import TOMBSTONE_DIR
from tests.conftest import LOCAL_HOST, ago, iso
from tests.soak import racers
from tests.soak.harness import CHECKOUT, report, soak_seconds
from tests.sources.test_file_feed import never_running_pid

FAST_ROUNDS = 40
DEAD = never_running_pid()
STALE_PID = f"{DEAD}\n".encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tower(heartbeat_seconds_ago: float, request: str) -> bytes:
    """A tower-fleet/v1 lock from this host whose holder heartbeats (or did)."""
    doc = {
        "lock_version": "v1",
        "lock_name": "deploy-prod",
        "request_id": request,
        "actor": "ci",
        "intent": "deploy",
        "intent_version": "1",
        "host_id": LOCAL_HOST,
        "pid": DEAD,
        "created_at": iso(ago(7200)),
        "last_heartbeat_at": iso(ago(heartbeat_seconds_ago)),
        "ttl_seconds": 900,
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


class Spread:
    """Delays for the writer that spread its move over the actor's whole action:
    from at once to a little after the actor's usual time, learned as it goes."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.times: list[float] = [0.005]

    def delay(self) -> float:
        return self.rng.uniform(0.0, 1.2 * statistics.median(self.times[-50:]))

    def saw(self, answer: dict[str, Any]) -> None:
        self.times.append(answer["seconds"])


class Race:
    """Racer processes, one per target, sharing a barrier; one round at a time."""

    def __init__(self, *targets: tuple[Callable[..., None], tuple[Any, ...]]) -> None:
        context = multiprocessing.get_context("spawn")
        self.barrier = context.Barrier(len(targets))
        self.pipes: list[Connection] = []
        self.processes: list[Any] = []
        for target, args in targets:
            mine, theirs = context.Pipe()
            process = context.Process(
                target=racers.run_job, args=(target, theirs, self.barrier, *args), daemon=True
            )
            process.start()
            theirs.close()
            self.pipes.append(mine)
            self.processes.append(process)

    def round(self, *jobs: Any) -> list[Any]:
        for pipe, job in zip(self.pipes, jobs, strict=True):
            pipe.send(job)
        answers = []
        for pipe in self.pipes:
            if not pipe.poll(60):
                raise AssertionError("a racer hung: no answer in 60 s")
            answer = pipe.recv()
            if isinstance(answer, dict) and "crashed" in answer:
                raise AssertionError(f"a racer crashed: {answer['crashed']}")
            answers.append(answer)
        return answers

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()


@contextlib.contextmanager
def race(*targets: tuple[Callable[..., None], tuple[Any, ...]]) -> Iterator[Race]:
    racing = Race(*targets)
    try:
        yield racing
    finally:
        racing.close()


def rounds_for(fast: int, soak: bool) -> Iterator[int]:
    """`fast` rounds, or as many as fit in LOCKWATCH_SOAK_SECONDS."""
    if not soak:
        yield from range(fast)
        return
    until = time.monotonic() + soak_seconds()
    n = 0
    while time.monotonic() < until:
        yield n
        n += 1


def said(outcome: dict[str, Any]) -> str:
    """An actor's outcome for an assertion: its whole message on a line of its own
    (a failure's cause is in it), then the rest."""
    rest = {key: value for key, value in outcome.items() if key != "message"}
    return f"{outcome.get('event')} ({outcome.get('code')}):\n{outcome.get('message')}\n{rest}"


def tombstones(directory: Path) -> list[bytes]:
    tomb_dir = directory / TOMBSTONE_DIR
    return [p.read_bytes() for p in sorted(tomb_dir.iterdir())] if tomb_dir.is_dir() else []


def audit_holds(log: Path, key: Path, rounds: int, actors: int) -> None:
    """The shared log verifies, and every intent written got its result."""
    verification = verify(log, key_file=key)
    assert verification.ok, (verification.status, verification.problem, verification.line)
    records = [record for _, record, _ in read_records(log) if record is not None]
    intents = {r["action_id"] for r in records if r["event"] == INTENT}
    results = Counter(r["action_id"] for r in records if r["event"] != INTENT)
    assert all(results[action] == 1 for action in intents), "an intent without its result"
    assert sum(results.values()) == rounds * actors  # every attempt has its outcome


@pytest.fixture
def audit(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "audit" / "audit.jsonl", tmp_path / "audit" / "audit.key"


# --------------------------------------------------------------------------- two breakers


def two_breakers(tmp_path: Path, audit: tuple[Path, Path], soak: bool) -> dict[str, Any]:
    log, key = audit
    losers: Counter[str] = Counter()
    done = 0
    with race((racers.actor, (str(log), str(key))), (racers.actor, (str(log), str(key)))) as r:
        for n in rounds_for(FAST_ROUNDS, soak):
            lock = tmp_path / "locks" / f"r{n}" / "worker.pid"
            lock.parent.mkdir(parents=True)
            lock.write_bytes(STALE_PID)
            answers = r.round(("break", str(lock), sha(STALE_PID)), ("break", str(lock), None))
            winners = [a for a in answers if a["ok"]]
            assert len(winners) == 1, answers
            (loser,) = [a for a in answers if not a["ok"]]
            assert loser["event"] == "action_refused", said(loser)  # refused, never failed
            losers[loser["code"]] += 1
            assert not lock.exists()
            assert tombstones(lock.parent) == [STALE_PID]
            done = n + 1
    audit_holds(log, key, done, 2)
    return {"rounds": done, "winners": done, "losers_refused_by_code": dict(losers)}


def test_two_breakers_one_winner(tmp_path: Path, audit: tuple[Path, Path]) -> None:
    report("two-breakers-fast", **two_breakers(tmp_path, audit, soak=False))


@pytest.mark.soak
def test_two_breakers_soak(tmp_path: Path, audit: tuple[Path, Path]) -> None:
    report("two-breakers-soak", **two_breakers(tmp_path, audit, soak=True))


def test_two_cli_breakers_one_winner(tmp_path: Path, audit: tuple[Path, Path]) -> None:
    """The same race with two real `lockwatch break` processes, started together."""
    log, key = audit
    env = {**os.environ, "PYTHONPATH": CHECKOUT, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    for n in range(3):
        lock = tmp_path / "locks" / f"cli{n}" / "worker.pid"
        lock.parent.mkdir(parents=True)
        lock.write_bytes(STALE_PID)
        command = [sys.executable, "-m", "lockwatch", "break", str(lock), "--reason", "race"]
        command += ["--yes", "--json", "--audit-log", str(log), "--audit-key", str(key)]
        command += ["--expect-sha256", sha(STALE_PID)]
        both = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            for _ in range(2)
        ]
        outcomes = []
        for process in both:
            out, err = process.communicate(timeout=60)
            outcomes.append((process.returncode, json.loads(out), err))
        assert sorted(code for code, _, _ in outcomes) == [0, 1], outcomes
        events = sorted(doc["event"] for _, doc, _ in outcomes)
        assert events == ["action_refused", "lock_broken"], outcomes
        assert tombstones(lock.parent) == [STALE_PID]
    audit_holds(log, key, 3, 2)


# --------------------------------------------------------------------------- break vs re-acquire


def break_against_acquire(
    tmp_path: Path, audit: tuple[Path, Path], how: str, soak: bool
) -> dict[str, Any]:
    log, key = audit
    outcomes: Counter[str] = Counter()
    done = 0
    spread = Spread(1)
    with race((racers.actor, (str(log), str(key))), (racers.writer, ())) as r:
        for n in rounds_for(FAST_ROUNDS, soak):
            lock = tmp_path / "locks" / f"r{n}" / "worker.pid"
            lock.parent.mkdir(parents=True)
            lock.write_bytes(STALE_PID)
            new = f"{os.getpid()}\n# taken again in round {n}\n".encode()
            broke, last = r.round(
                ("break", str(lock), sha(STALE_PID)), (how, str(lock), [new], spread.delay())
            )
            spread.saw(broke)
            assert last == new
            tombs = tombstones(lock.parent)
            now = lock.read_bytes() if lock.exists() else None
            outcomes[broke["event"] if broke["ok"] else f"refused:{broke['code']}"] += 1
            assert broke["event"] in ("lock_broken", "action_refused"), said(broke)
            if how == "inplace" and now != new:
                # A writer that rewrites in place through a descriptor it opened
                # before the move writes into the moved file: no rename can stop
                # that, and no check after it can see a write that comes later.
                # Its lock is never lost, only kept in the tombstone; counted.
                assert broke["ok"] and tombs == [new], (broke, tombs, now)
                outcomes["in-place write landed in the tombstone"] += 1
            else:
                # A tombstone holds the bytes the operator saw, or nothing.
                assert tombs == ([STALE_PID] if broke["ok"] else []), (broke, tombs)
                # The lock taken again is where its holder put it.
                assert now == new, (broke, now)
            done = n + 1
    audit_holds(log, key, done, 1)
    return {"rounds": done, "how": how, "outcomes": dict(outcomes)}


@pytest.mark.parametrize("how", ["atomic", "recreate", "inplace"])
def test_a_break_never_takes_a_lock_taken_again(
    tmp_path: Path, audit: tuple[Path, Path], how: str
) -> None:
    report(f"break-vs-reacquire-{how}-fast", **break_against_acquire(tmp_path, audit, how, False))


@pytest.mark.soak
@pytest.mark.parametrize("how", ["atomic", "recreate", "inplace"])
def test_break_against_reacquire_soak(tmp_path: Path, audit: tuple[Path, Path], how: str) -> None:
    report(f"break-vs-reacquire-{how}-soak", **break_against_acquire(tmp_path, audit, how, True))


# --------------------------------------------------------------------------- steal vs heartbeat


def steal_against_heartbeat(tmp_path: Path, audit: tuple[Path, Path], soak: bool) -> dict[str, Any]:
    log, key = audit
    outcomes: Counter[str] = Counter()
    done = 0
    old = tower(7200, "req_old")  # two hours without a heartbeat: stale at NOW
    spread = Spread(2)
    with race((racers.actor, (str(log), str(key))), (racers.writer, ())) as r:
        for n in rounds_for(FAST_ROUNDS, soak):
            lock = tmp_path / "logs" / f"r{n}" / "locks" / "deploy-prod.lock"
            lock.parent.mkdir(parents=True)
            lock.write_bytes(old)
            beats = [tower(0, f"req_old-beat{b}") for b in range(3)]
            stole, last = r.round(
                ("steal", str(lock), sha(old)), ("atomic", str(lock), beats, spread.delay())
            )
            spread.saw(stole)
            assert stole["state"] == "stale"
            # Stolen; refused (the heartbeat came first); or failed half-way, as
            # `replace` documents: the stale lock moved aside, then the new one not
            # linked in because the holder's heartbeat got there first.
            moved = stole["ok"] or (stole["event"], stole["code"]) == ("action_failed", "taken")
            # Or a heartbeat landed between lockwatch's check and its move, and the
            # next one before it could be put back: failed, said so, that heartbeat
            # kept in the tombstone (`_put_back` never overwrites the newer one).
            raced = (stole["event"], stole["code"]) == ("action_failed", "raced")
            assert moved or raced or stole["event"] == "action_refused", stole
            outcomes[stole["event"] if stole["ok"] else f"{stole['event']}:{stole['code']}"] += 1
            tombs = tombstones(lock.parent)
            if raced:
                assert len(tombs) == 1 and tombs[0] in beats[:-1], (stole, tombs)
            else:
                assert tombs == ([old] if moved else []), (stole, tombs)
            # The holder's last heartbeat is never lost: either the steal was refused
            # (it came first), or it came after the steal and replaced it.
            assert lock.read_bytes() == last == beats[-1]
            done = n + 1
    audit_holds(log, key, done, 1)
    return {"rounds": done, "outcomes": dict(outcomes)}


def test_a_steal_never_loses_a_heartbeat(tmp_path: Path, audit: tuple[Path, Path]) -> None:
    report("steal-vs-heartbeat-fast", **steal_against_heartbeat(tmp_path, audit, False))


@pytest.mark.soak
def test_steal_against_heartbeat_soak(tmp_path: Path, audit: tuple[Path, Path]) -> None:
    report("steal-vs-heartbeat-soak", **steal_against_heartbeat(tmp_path, audit, True))


# --------------------------------------------------------------------------- symlink swaps


def break_while_swapped(tmp_path: Path, audit: tuple[Path, Path], soak: bool) -> dict[str, Any]:
    log, key = audit
    outcomes: Counter[str] = Counter()
    swaps = 0
    done = 0
    directory = tmp_path / "locks"
    elsewhere = tmp_path / "elsewhere"
    directory.mkdir()
    elsewhere.mkdir()
    decoy = elsewhere / "app.lock"
    decoy.write_bytes(STALE_PID)  # the same bytes: only where it is tells them apart
    lock = directory / "app.lock"
    with race((racers.actor, (str(log), str(key))), (racers.swapper, ())) as r:
        for n in rounds_for(FAST_ROUNDS, soak):
            if not lock.exists():
                lock.write_bytes(STALE_PID)
            broke, swapped = r.round(
                ("break", str(lock), sha(STALE_PID)), (str(directory), str(elsewhere), 0.02)
            )
            swaps += swapped
            assert broke["event"] in ("lock_broken", "action_refused"), said(broke)
            outcomes["broken" if broke["ok"] else f"refused:{broke['code']}"] += 1
            if broke["ok"]:
                assert broke["tombstone"].startswith(str(directory / TOMBSTONE_DIR))
            # Nothing happened through the symlink: the decoy is where it was, as it was.
            assert sorted(os.listdir(elsewhere)) == ["app.lock"]
            assert decoy.read_bytes() == STALE_PID
            assert set(tombstones(directory)) <= {STALE_PID}
            done = n + 1
    assert len(tombstones(directory)) == outcomes["broken"]
    audit_holds(log, key, done, 1)
    return {"rounds": done, "swaps": swaps, "outcomes": dict(outcomes)}


def test_a_break_never_acts_through_a_swapped_directory(
    tmp_path: Path, audit: tuple[Path, Path]
) -> None:
    report("symlink-swaps-fast", **break_while_swapped(tmp_path, audit, False))


@pytest.mark.soak
def test_symlink_swaps_soak(tmp_path: Path, audit: tuple[Path, Path]) -> None:
    report("symlink-swaps-soak", **break_while_swapped(tmp_path, audit, True))
