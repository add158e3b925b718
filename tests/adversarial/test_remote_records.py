"""A remote's records are checked against the lockwatch.ls/1 contract before
anything here uses them: a record with a wrong type, an age out of range or a
date that is not one is counted and dropped (never passed on to a merged
`ls --remote --json`), its text never drives a terminal, and a long field is cut
with its length said wherever it is shown in one line.

The remote is the loopback server of test_remote_deadline.py, answering a
document written by hand (a hostile serve)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from lockwatch.sources.remote.document import read_document
from lockwatch.sources.remote.records import json_array
from tests.adversarial.test_remote_deadline import (
    BOUND_S,
    Answer,
    Remote_,
    http_answer,
    lock_record,
    ls_document,
)
from tests.conftest import LOCAL_HOST

URL = "http://db7:9464"
MEGA = "x" * (1 << 20)

HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("negative age", {"age_seconds": -5.0}),
    ("huge age", {"age_seconds": 1e308}),
    ("huge ttl", {"ttl_seconds": 1e308}),
    ("negative ttl", {"ttl_seconds": -3}),
    ("age as text", {"age_seconds": "old"}),
    ("not a date", {"acquired_at": "not a date"}),
    ("date as number", {"heartbeat_at": 17}),
    ("holder as list", {"holder": ["pid", 4242]}),
    ("holder as text", {"holder": "root"}),
    ("pid as bool", {"holder": {"pid": True}}),
    ("negative pid", {"holder": {"pid": -1}}),
    ("huge pid", {"holder": {"pid": 2**62}}),
    ("alive as text", {"holder": {"alive": "yes"}}),
    ("holder host as number", {"holder": {"host": 5}}),
    ("scope not paths", {"scope": "/srv"}),
    ("a wait in the far future", {"wait_seconds": 1e308}),
    ("a nested date", {"holder": {"process": {"started_at": "yesterday"}}}),
    ("huge id", {"id": "file:/" + MEGA}),
]


def test_every_hostile_record_is_counted_and_dropped() -> None:
    good = lock_record("file:/srv/ok.pid")
    hostile = [
        lock_record(f"file:/srv/bad{i}.pid", **fields) for i, (_, fields) in enumerate(HOSTILE)
    ]
    listing = read_document(ls_document(good, *hostile), URL, local_host=LOCAL_HOST)
    assert [lock.name for lock in listing.locks] == ["ok"]
    assert [record["id"] for record in listing.records] == ["file:/srv/ok.pid"]
    assert listing.ignored == len(HOSTILE)
    assert f"{len(HOSTILE)} records not understood" in listing.summary()


def test_a_dropped_record_is_named_with_its_fields_cut() -> None:
    listing = read_document(
        ls_document(lock_record("file:/" + MEGA, age_seconds=1e308)), URL, local_host=LOCAL_HOST
    )
    assert listing.ignored == 1
    (why,) = listing.dropped
    assert len(why) < 400, why
    assert "(1,048,582 chars)" in why
    assert "0" * 50 not in why  # 1e308 is not spelled out in 300 digits


def test_hostile_text_never_reaches_a_terminal_raw() -> None:
    name = "deploy\u009b31m\u202egpj.exe\x1b]0;pwned\x07"
    listing = read_document(
        ls_document(lock_record(name=name, holder={"pid": 4242, "actor": "\u202eroot"})),
        URL,
        local_host=LOCAL_HOST,
    )
    (lock,) = listing.locks
    # The model keeps what the remote said (the table and the detail pane sanitise it)...
    assert lock.name == name
    # ...and the merged JSON carries it escaped: the same string to a JSON reader,
    # no raw C1 or bidi control to a terminal that `ls --json` is printed on.
    out = json_array(listing.records)
    for raw in ("\u009b", "\u202e", "\x1b", "\x07"):
        assert raw.encode() not in out
    assert orjson.loads(out)[0]["name"] == name


def test_a_long_summary_field_is_cut_with_its_length() -> None:
    sources = [{"kind": "postgres", "name": MEGA, "status": "disconnected"}]
    document = orjson.loads(ls_document(lock_record()))
    document["sources"] = sources
    listing = read_document(orjson.dumps(document), URL, local_host=LOCAL_HOST)
    summary = listing.summary()
    assert len(summary) < 400 and "(1,048,576 chars)" in summary


def test_a_huge_host_is_cut_in_the_status() -> None:
    listing = read_document(ls_document(lock_record(), host="h" * 5000), URL, local_host=LOCAL_HOST)
    assert len(listing.summary()) < 400 and "(5,000 chars)" in listing.summary()


@pytest.fixture
def hostile_remote() -> Iterator[Remote_]:
    records = [lock_record("file:/srv/ok.pid")] + [
        lock_record(f"file:/srv/bad{i}.pid", **fields) for i, (_, fields) in enumerate(HOSTILE)
    ]
    records.append(lock_record("file:/srv/evil.pid", name="evil\u009b\u202e"))
    yield from Remote_(Answer(http_answer(ls_document(*records)))).serve()


def test_ls_remote_json_passes_no_bad_record_on(hostile_remote: Remote_) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--remote", hostile_remote.url, "--json"],
        capture_output=True,
        timeout=BOUND_S + 30,
        stdin=subprocess.DEVNULL,
    )
    # Part of what the remote said was left out: a partial picture, exit 1.
    assert done.returncode == 1, done.stderr
    for raw in ("\u009b", "\u202e"):
        assert raw.encode() not in done.stdout
    document = json.loads(done.stdout)
    assert sorted(lock["id"] for lock in document["locks"]) == [
        "file:/srv/evil.pid",
        "file:/srv/ok.pid",
    ]
    (source,) = document["sources"]
    assert f"{len(HOSTILE)} records not understood" in source["reason"]
    (line,) = done.stderr.decode().splitlines()
    assert f"{len(HOSTILE)} records not understood, left out" in line and len(line) < 1000
    # The table's warning says how many, in one line, without the megabyte.
    table = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--remote", hostile_remote.url],
        capture_output=True,
        timeout=BOUND_S + 30,
        stdin=subprocess.DEVNULL,
    )
    assert table.returncode == 1, table.stderr
    assert len(table.stdout) + len(table.stderr) < 20_000
    for raw in ("\u009b", "\u202e"):
        assert raw.encode() not in table.stdout + table.stderr
