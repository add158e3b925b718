"""/v1/locks from the watcher's Board: the lockwatch.ls/1 document `ls --json`
renders, with ages as of the request, and one rendering shared while nothing
changed."""

from __future__ import annotations

from datetime import timedelta

import orjson

from lockwatch.clock import FrozenClock
from lockwatch.model.changes import ChangeSet
from lockwatch.model.report import LS_SCHEMA
from lockwatch.serve.document import Documents, document
from lockwatch.serve.watcher import Watcher
from tests.conftest import LOCAL_HOST, NOW
from tests.ui.fakes import FILES_FEED, PG_SERVER, mixed_scenario


def watching_mixed() -> Watcher:
    watcher = Watcher([], host=LOCAL_HOST, clock=FrozenClock(NOW))
    for change in mixed_scenario():
        watcher.receive(change)
    return watcher


def test_the_document_is_the_ls_contract_of_the_board() -> None:
    watcher = watching_mixed()
    later = NOW + timedelta(seconds=90)
    doc = orjson.loads(document(watcher, later, LOCAL_HOST))
    assert doc["schema"] == LS_SCHEMA and doc["host"] == LOCAL_HOST
    assert doc["generated_at"] == "2026-11-21T12:01:30Z"
    board = watcher.board
    assert [lock["id"] for lock in doc["locks"]] == sorted(board.entries)
    for lock in doc["locks"]:
        entry = board.entries[lock["id"]]
        assert lock["state"] == board.verdict(lock["id"]).state.value
        if entry.lock.acquired_at is not None:
            # Aged as of the request, not as of the last judgement.
            expected = (later - entry.lock.acquired_at).total_seconds()
            assert abs(lock["age_seconds"] - expected) < 0.01, lock["id"]
    assert {s["name"] for s in doc["sources"]} == {s.name for s in board.all_statuses()}
    (tree,) = [t for t in doc["blocking"] if t["server"] == PG_SERVER]
    assert tree["roots"][0]["blocks_in_total"] == 3


def test_one_rendering_is_shared_until_something_changes() -> None:
    watcher = watching_mixed()
    documents = Documents(watcher, LOCAL_HOST, keep=1.0)
    first = documents.get(NOW)
    assert documents.get(NOW + timedelta(seconds=0.5)) is first
    assert documents.get(NOW + timedelta(seconds=1.5)) is not first
    again = documents.get(NOW + timedelta(seconds=1.6))
    watcher.receive(ChangeSet(FILES_FEED, NOW, full=True))  # every lock file gone
    emptier = documents.get(NOW + timedelta(seconds=1.7))
    assert emptier is not again
    # A few locks: each is the document whole (a Stream only from STREAM_FROM on).
    assert isinstance(emptier, bytes) and isinstance(again, bytes)
    assert len(orjson.loads(emptier)["locks"]) < len(orjson.loads(again)["locks"])
