"""The ZooKeeper source on lockwatch's other surfaces, against the throwaway
ZooKeeper with kazoo's recipes: the dashboard's feed woken by a watch, its break
from the dashboard through the same reach as the CLI, `serve`'s wait series, and
`why` on kazoo's own timeout message."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import SystemClock
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet
from lockwatch.serve.metrics import figures
from lockwatch.ui.app import LockwatchApp
from tests.conftest import LOCAL_HOST, run_cli
from tests.serve.test_metrics import exposition
from tests.ui.fakes import builtin_themes
from tests.ui.test_actions_ui import (
    confirm_screen,
    notes,
    open_action,
    press_confirm,
    screen_text,
    type_into,
    until,
)
from tests.zookeeper.conftest import WAIT_S, Area
from tests.zookeeper.test_zookeeper import by_identifier, queued, session_hex


def _feed(area: Area, interval: float) -> Any:
    from lockwatch.sources.zookeeper.endpoint import parse
    from lockwatch.sources.zookeeper.plugin import SelectedZooKeeper

    selected = SelectedZooKeeper((parse(area.zk.connect),), (area.root,), refresh=interval)
    (feed,) = selected.feeds(SystemClock(), LOCAL_HOST)
    return feed


def scraped(area: Area) -> dict[Any, float]:
    """`serve`'s /metrics samples after one poll of the area's ZooKeeper."""
    feed = _feed(area, interval=60)
    try:
        change, _ = feed.poll()
    finally:
        feed.poller.close()
    board = Board(LOCAL_HOST)
    board.apply(change)
    return exposition(figures(board, change.at, sources=("zookeeper",)))


@pytest.mark.parametrize("paced", [False, True], ids=["dashboard", "serve"])
async def test_a_watch_wakes_the_feed_long_before_its_interval(zk: Area, paced: bool) -> None:
    """With a refresh of an hour, only a ZooKeeper watch can bring the new
    contender to the screen (or serve's history) within the test's bound; serve
    paces its feeds with its own `sleep` (idle: an hour here), and the watch
    still wakes it."""
    from lockwatch.serve.pace import Pace

    a = zk.zk.client()
    path = zk.path("watched")
    assert a.Lock(path, "first").acquire(timeout=10)
    feed = _feed(zk, interval=3600)
    if paced:
        feed.sleep = Pace(idle_seconds=3600).sleep  # as serve's watcher sets it
    changes: asyncio.Queue[ChangeSet] = asyncio.Queue()
    task = asyncio.ensure_future(feed.run(changes.put_nowait))
    try:
        first = await asyncio.wait_for(changes.get(), WAIT_S)
        assert [e.lock.holder.actor for e in first.upserts] == ["first"]
        b = zk.zk.client()
        await asyncio.to_thread(queued, b, b.Lock(path, "second"), 2, path)

        async def seen() -> ChangeSet:
            while True:
                change = await changes.get()
                if any(e.lock.holder.actor == "second" for e in change.upserts):
                    return change

        change = await asyncio.wait_for(seen(), WAIT_S)
        (waiter,) = [e for e in change.upserts if e.lock.holder.actor == "second"]
        assert waiter.verdict.state.value == "waiting"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await feed.close()


def test_serve_counts_each_ensembles_queue(zk: Area) -> None:
    a, b, c = zk.zk.client(), zk.zk.client(), zk.zk.client()
    path = zk.path("queue")
    assert a.Lock(path, "head").acquire(timeout=10)
    queued(b, b.Lock(path, "second"), 2, path)
    queued(c, c.Lock(path, "third"), 3, path)
    samples = scraped(zk)
    server = (("server", f"zookeeper:{zk.zk.connect}"),)
    assert samples[("lockwatch_zk_blocked_sessions", server)] == 2
    assert samples[("lockwatch_zk_root_blockers", server)] == 1
    assert samples[("lockwatch_zk_root_blocker_max_blocked_sessions", server)] == 2
    assert samples[("lockwatch_zk_longest_wait_seconds", server)] >= 0
    assert samples[("lockwatch_locks", (("source", "zookeeper"), ("state", "waiting")))] == 2
    held = (("source", "zookeeper"), ("state", "active"))
    assert samples[("lockwatch_lock_oldest_age_seconds", held)] >= 0
    # One series per ensemble: the status's and the locks' are one label.
    labels = {dict(key[1]).get("server") for key in samples if key[0].startswith("lockwatch_zk_")}
    assert labels == {f"zookeeper:{zk.zk.connect}"}, labels
    # The lock path's own gauges, once, from its holder: its age and its queue.
    lock = (("name", path), ("server", f"zookeeper:{zk.zk.connect}"))
    assert samples[("lockwatch_zk_queue_length", lock)] == 2
    assert samples[("lockwatch_zk_holder_age_seconds", lock)] >= 0
    assert [key for key in samples if key[0] == "lockwatch_zk_queue_length"] == [
        ("lockwatch_zk_queue_length", lock)
    ]


def test_why_finds_the_lock_a_kazoo_lock_timeout_names(zk: Area) -> None:
    from kazoo.exceptions import LockTimeout

    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("report")
    assert a.Lock(path, "nightly").acquire(timeout=10)
    try:
        b.Lock(path, "impatient").acquire(timeout=0.2)
    except LockTimeout as exc:
        message = f"kazoo.exceptions.LockTimeout: {exc}"  # as a traceback's last line says it
    else:
        raise AssertionError("kazoo's lock was acquired under its holder")
    code, out, err = run_cli("why", "--zk", zk.zk.connect, "--json", message)
    assert code == 0, err
    document = json.loads(out)
    text = json.dumps(document)
    assert path in text and session_hex(a) in text and "nightly" in text


def _dashboard(values: dict[str, Any], audit_log: Path) -> LockwatchApp:
    """The dashboard as `lockwatch --zk …` builds it (cli/watch.py)."""
    from lockwatch.cli.watch import build_app
    from lockwatch.cli.where import select_targets
    from lockwatch.config import Config

    targets = select_targets(values, Config(), {})
    app = build_app(targets, host=LOCAL_HOST, audit_log=audit_log, themes=builtin_themes())
    app.animation_level = "none"
    return app


async def test_the_dashboard_breaks_a_dead_holder_through_the_same_reach_as_the_cli(
    zk: Area, tmp_path: Path
) -> None:
    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("dash")
    # A persistent contender (no session): unknown, its holder cannot be seen; the
    # break takes its name typed, as any holder's that is not known dead.
    a.create(f"{path}/{uuid.uuid4().hex}__lock__", b"ghost", sequence=True, makepath=True)
    lock = b.Lock(path, "live")
    thread = await asyncio.to_thread(queued, b, lock, 2, path)
    ghost = by_identifier(zk)["ghost"]
    values = {"zk_servers": (zk.zk.connect,), "zk_paths": (zk.root,)}
    app = _dashboard(values, tmp_path / "audit.jsonl")
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: ghost["id"] in app.board, "the ZooKeeper rows")
        await open_action(pilot, ghost["id"])
        said = screen_text(confirm_screen(app))
        assert "czxid" in said and ghost["znode"] in said
        await type_into(pilot, "#reason", "ghost node, INC-8")
        await type_into(pilot, "#must-type", path)
        await press_confirm(pilot)
        await until(pilot, lambda: any("deleted" in n for n in notes(app)), "done")
    await asyncio.to_thread(thread.join, WAIT_S)
    assert lock.is_acquired  # the waiter's watch fired: it holds the lock now
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert records[-1]["target"]["source"] == "zookeeper" and records[-1]["result"] == "success"


async def test_the_dashboard_says_what_breaking_a_live_holder_does(
    zk: Area, tmp_path: Path
) -> None:
    a = zk.zk.client()
    path = zk.path("alive")
    assert a.Lock(path, "working").acquire(timeout=10)
    held = by_identifier(zk)["working"]
    values = {"zk_servers": (zk.zk.connect,), "zk_paths": (zk.root,)}
    app = _dashboard(values, tmp_path / "audit.jsonl")
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: held["id"] in app.board, "the ZooKeeper row")
        await open_action(pilot, held["id"])
        said = " ".join(screen_text(confirm_screen(app)).split())
        assert f"Session {session_hex(a)}" in said and "goes on believing it holds" in said
    assert a.get_children(path)  # nothing done


def test_a_recording_keeps_its_facts(zk: Area, tmp_path: Path) -> None:
    from lockwatch.model import codec
    from lockwatch.sources.recording import Recorder, ReplayFeed
    from lockwatch.sources.zookeeper.facts import ZkLock

    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("recorded")
    assert a.Lock(path, "kept").acquire(timeout=10)
    queued(b, b.Lock(path, "behind"), 2, path)
    feed = _feed(zk, interval=60)
    try:
        change, _ = feed.poll()
    finally:
        feed.poller.close()
    recording = tmp_path / "incident.rec"
    recorder = Recorder(recording, host=LOCAL_HOST, now=change.at)
    recorder.write(change)
    recorder.close()
    (line,) = ReplayFeed.open(recording)._lines
    back = codec.loads_line(line)
    assert isinstance(back, ChangeSet) and back.upserts == change.upserts
    facts = [entry.lock.facts for entry in back.upserts]
    assert all(isinstance(f, ZkLock) for f in facts)
    assert sorted(f.identifier for f in facts if isinstance(f, ZkLock)) == ["behind", "kept"]


def test_why_finds_the_semaphore_a_kazoo_semaphores_queue_timeout_names(zk: Area) -> None:
    """kazoo's Semaphore queues its callers with a Lock at `<path>-__lock__`: one that
    times out in that queue raises the Lock's message, naming the queue's path."""
    from kazoo.exceptions import LockTimeout

    a, b, c = zk.zk.client(), zk.zk.client(), zk.zk.client()
    path = zk.path("pool")
    assert a.Semaphore(path, "lease-holder", max_leases=1).acquire(timeout=10)
    queued(b, b.Semaphore(path, "first-in-queue", max_leases=1), 1, f"{path}-__lock__")
    try:
        c.Semaphore(path, "impatient", max_leases=1).acquire(timeout=0.3)
    except LockTimeout as exc:
        message = f"kazoo.exceptions.LockTimeout: {exc}"
    else:
        raise AssertionError("kazoo's semaphore was acquired past its holder and its queue")
    assert f"on {path}-__lock__ after" in message  # kazoo's own words
    code, out, err = run_cli("why", "--zk", zk.zk.connect, "--json", message)
    assert code == 0, err
    text = json.dumps(json.loads(out))
    assert session_hex(a) in text and "lease-holder" in text


def test_a_break_of_a_semaphores_queued_caller_reads_the_semaphore_too(zk: Area) -> None:
    """The caller first in a full semaphore's queue holds the queue's Lock and
    waits for a lease: a break finds it waiting (nothing held), as `ls` does."""
    from tests.zookeeper.test_zookeeper import _plan

    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("slots")
    assert a.Semaphore(path, "holding", max_leases=1).acquire(timeout=10)
    queued(b, b.Semaphore(path, "queued", max_leases=1), 1, f"{path}-__lock__")
    (waiter,) = [lock for lock in by_identifier(zk).values() if lock["state"] == "waiting"]
    plan = _plan(zk, waiter["id"])
    assert plan.verdict.state.value == "waiting"
    assert plan.refusal is not None and plan.refusal[0] == "not_held"


async def test_a_forced_break_of_a_live_holder_at_80x24_hands_the_lock_on(
    zk: Area, tmp_path: Path
) -> None:
    """The smallest terminal the dashboard supports: the confirmation's reason and
    typed name fit, and the break deletes the node; the waiter's watch fires."""
    a, b = zk.zk.client(), zk.zk.client()
    path = zk.path("small")
    assert a.Lock(path, "live-holder").acquire(timeout=10)
    lock = b.Lock(path, "next-in-line")
    thread = await asyncio.to_thread(queued, b, lock, 2, path)
    held = by_identifier(zk)["live-holder"]
    values = {"zk_servers": (zk.zk.connect,), "zk_paths": (zk.root,)}
    app = _dashboard(values, tmp_path / "audit.jsonl")
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: held["id"] in app.board, "the ZooKeeper rows")
        await open_action(pilot, held["id"])
        await type_into(pilot, "#reason", "wedged, INC-9")
        await type_into(pilot, "#must-type", path)
        await press_confirm(pilot)
        await until(pilot, lambda: any("deleted" in n for n in notes(app)), "done")
    await asyncio.to_thread(thread.join, WAIT_S)
    assert lock.is_acquired
    record = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert record["result"] == "success" and record["forced"] is True
