"""The history file under faults (issue 44, item 1): a corrupt file, a newer
schema, a file others can write, a disk that fills up (a real tmpfs), a
recorder killed with SIGKILL, two recorders on one file. The recorders here are
real `lockwatch serve` processes (or the serve Watcher in-process) watching a
real flock held by util-linux `flock`."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockwatch.history.api import HistoryError, open_history
from tests.adversarial.test_audit_full_disk import tmpfs
from tests.history.harness import HOST, reader, recording, wait_until


def _serve(tmp: Path, history: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lockwatch",
            "serve",
            "--kernel",
            str(tmp),
            "--listen",
            "127.0.0.1:0",
            "--refresh",
            "0.2",
            "--history",
            str(history),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Path]:
    """A lock file a real `flock` process holds for the test."""
    lock = tmp_path / "locks" / "deploy.lock"
    lock.parent.mkdir()
    lock.touch()
    holder = subprocess.Popen(["flock", str(lock), "cat"], stdin=subprocess.PIPE)
    try:
        yield lock
    finally:
        holder.kill()
        holder.wait()


def _recorded(history: Path, lock: Path) -> bool:
    if not history.exists():
        return False
    try:
        store = open_history(str(history))
    except HistoryError:
        return False
    try:
        return any(span.place == str(lock) for span in store.lock_spans(None, None))
    finally:
        store.close()


def test_a_corrupt_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "history.sqlite3"
    bad.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    bad.chmod(0o600)
    with pytest.raises(HistoryError) as caught:
        open_history(str(bad))
    assert "not a lockwatch history" in str(caught.value)
    assert "\n" not in str(caught.value)
    out = subprocess.run(
        [sys.executable, "-m", "lockwatch", "history", "--history", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_another_sqlite_file_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    other.chmod(0o600)
    with pytest.raises(HistoryError, match="another SQLite file"):
        open_history(str(other), write=True)


def test_a_newer_schema_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    open_history(str(path), write=True).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    with pytest.raises(HistoryError, match="newer lockwatch"):
        open_history(str(path))
    with pytest.raises(HistoryError, match="newer lockwatch"):
        open_history(str(path), write=True)


def test_a_file_others_can_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    open_history(str(path), write=True).close()
    path.chmod(0o666)
    for write in (False, True):
        with pytest.raises(HistoryError, match="can write it"):
            open_history(str(path), write=write)


def test_a_new_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "history.sqlite3"
    open_history(str(path), write=True).close()
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_a_reader_never_makes_a_file(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no history recorded here"):
        open_history(str(tmp_path / "none.sqlite3"))
    assert not (tmp_path / "none.sqlite3").exists()


def test_sigkill_loses_at_most_the_last_poll(tmp_path: Path, held: Path) -> None:
    history = tmp_path / "history.sqlite3"
    serve = _serve(held.parent, history)
    try:
        wait_until(lambda: _recorded(history, held), "the held lock recorded")
    finally:
        serve.send_signal(signal.SIGKILL)
        serve.wait()
    with sqlite3.connect(history) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = reader(history)
    spans = [s for s in store.lock_spans(None, None) if s.place == str(held)]
    assert spans and spans[0].state == "active"
    # A new recorder on the killed one's file goes on.
    again = _serve(held.parent, history)
    try:
        wait_until(
            lambda: len(reader(history).hosts()) == 1 and _sessions(history) == 2,
            "a second recorder session",
        )
    finally:
        again.terminate()
        again.wait()


def _sessions(history: Path) -> int:
    with sqlite3.connect(f"file:{history}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM sessions").fetchone()[0])


def test_two_recorders_on_one_file(tmp_path: Path, held: Path) -> None:
    history = tmp_path / "history.sqlite3"
    first, second = _serve(held.parent, history), _serve(held.parent, history)
    try:
        try:
            wait_until(
                lambda: _recorded(history, held) and _sessions(history) == 2,
                "both recorders writing",
            )
        except BaseException:
            for serve in (first, second):  # what each said, with the failure
                serve.terminate()
            said = [serve.communicate(timeout=60)[1] for serve in (first, second)]
            print("recorders said:", said, "sessions:", _sessions(history))
            raise
        wait_until(
            lambda: len(set(_span_sessions(history, str(held)))) == 2,
            "the lock recorded by both",
        )
    finally:
        for serve in (first, second):
            serve.terminate()
        errors = [serve.communicate(timeout=60)[1] for serve in (first, second)]
    assert all(b"recording stopped" not in err for err in errors), errors
    store = reader(history)
    spans = [span for span in store.lock_spans(None, None) if span.place == str(held)]
    # Inside each span the lock was recorded in (by either recorder, most of them by
    # both at once): one lock, though both recorded it. The middle of a span, not
    # its start: a recorder stopped the instant it opened one leaves it empty.
    middles = [s.start + (s.end - s.start) / 2 for s in spans if s.end and s.end > s.start]
    assert middles, spans
    for at in middles:
        named = [lock for lock in store.locks_at(at) if lock.path == str(held)]
        assert len(named) == 1, (at, spans)


def _span_sessions(history: Path, place: str) -> list[int]:
    with sqlite3.connect(f"file:{history}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT session FROM locks WHERE place = ?", (place,))
        return [row[0] for row in rows]


def test_a_full_disk_stops_recording_not_watching(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "tiny", "2m") as disk:
        history = disk / "history.sqlite3"
        open_history(str(history), write=True, host=HOST).close()
        filler = disk / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"x" * 4096):
                pass
        except OSError:
            pass  # full
        finally:
            os.close(fd)
        locks = tmp_path / "locks"
        locks.mkdir()
        for n in range(200):
            (locks / f"job-{n}.lock").write_text(f'{{"pid": {os.getpid()}, "note": "{"x" * 500}"}}')
        with (
            pytest.raises(AssertionError, match="disk full"),
            recording([str(locks)], history, 0.2) as watcher,
        ):
            recorder = watcher.recorder
            assert recorder is not None
            wait_until(lambda: recorder.failed is not None, "the recording to stop")
            assert "disk full" in (recorder.failed or "")
            # Watching goes on: a new lock still reaches the board.
            (locks / "late.lock").write_text("{}")
            wait_until(
                lambda: any(
                    e.lock.name.startswith("late") for e in list(watcher.board.entries.values())
                ),
                "a new lock on the board after the disk filled",
            )


def _open_when_told(path: str, go: Any, said: Any) -> None:
    go.wait()
    try:
        open_history(path, write=True).close()
        said.put("ok")
    except HistoryError as exc:
        said.put(str(exc))


def test_two_recorders_making_a_new_file_at_once_both_open_it(tmp_path: Path) -> None:
    """A `serve` and a dashboard started together on a new file: the one that loses
    the race to make it was refused ("database is locked", or the half-made file
    taken for another SQLite file's) and recorded nothing. Both open it now."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for round_ in range(20):
        path = str(tmp_path / f"r{round_}" / "history.sqlite3")
        go, said = context.Event(), context.Queue()
        racers = [context.Process(target=_open_when_told, args=(path, go, said)) for _ in (1, 2)]
        for racer in racers:
            racer.start()
        go.set()
        answers = [said.get(timeout=60), said.get(timeout=60)]
        for racer in racers:
            racer.join(60)
        assert answers == ["ok", "ok"], (round_, answers)


def test_serve_says_when_its_recording_stops(tmp_path: Path, held: Path) -> None:
    """A history serve cannot record into (here, a file others may write) stops the
    recording, not the watching, and says so on stderr in one line, once: before,
    only a metric told, and a service's log was silent about the hole."""
    import threading

    history = tmp_path / "history.sqlite3"
    open_history(str(history), write=True).close()
    history.chmod(0o666)
    serve = _serve(held.parent, history)
    killer = threading.Timer(60, serve.kill)  # a bound, never a timing assertion
    killer.start()
    try:
        assert serve.stderr is not None
        lines = []
        for line in serve.stderr:
            lines.append(line)
            if b"recording stopped" in line:
                break
        assert lines and b"recording stopped" in lines[-1], lines
        assert b"can write it" in lines[-1]
    finally:
        killer.cancel()
        serve.terminate()
        rest = serve.communicate(timeout=60)[1]
    assert b"recording stopped" not in rest  # said once
