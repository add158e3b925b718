"""`Row` and `Document`: values kept compact, read as mappings, written as dicts."""

from __future__ import annotations

import dataclasses
import json
import operator
import pickle
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from lockwatch.actions.run import lock_hash
from lockwatch.model.codec import decode, dumps_line, encode, loads_line
from lockwatch.model.compact import Columns, Document, Row, plain
from lockwatch.model.lock import Lock
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.files.decoders.base import LockFile
from lockwatch.sources.postgres.facts import PgBackend, PgLock
from lockwatch.ui.detail import _render_content

COLUMNS = Columns(["locktype", "mode", "granted", "pid", "blocked_by"])
VALUES = ("advisory", "ExclusiveLock", True, 4242, None)
AS_DICT = dict(zip(COLUMNS.names, VALUES, strict=True))


def row() -> Row:
    return Row(COLUMNS, VALUES)


def test_a_row_reads_as_the_dict_it_stands_for() -> None:
    r = row()
    assert isinstance(r, Mapping)
    assert r["mode"] == "ExclusiveLock"
    assert r.get("pid") == 4242
    assert r.get("blocked_by", "absent") is None  # a null column is None, not the default
    assert r.get("nope") is None and r.get("nope", 7) == 7
    assert "granted" in r and "nope" not in r
    assert 4242 not in r  # type: ignore[comparison-overlap]
    assert list(r) == list(COLUMNS.names) and len(r) == 5
    assert dict(r.items()) == AS_DICT and r.as_dict() == AS_DICT
    with pytest.raises(KeyError):
        r["nope"]


def test_rows_equal_dicts_both_ways_and_are_not_hashable() -> None:
    assert row() == AS_DICT
    assert operator.eq(AS_DICT, row())  # a dict on the left: the row's __eq__, reflected
    assert row() == Row(Columns(list(COLUMNS.names)), list(VALUES))
    assert row() != {**AS_DICT, "pid": 1}
    assert row() != list(VALUES)  # type: ignore[comparison-overlap]
    with pytest.raises(TypeError):
        hash(row())


def test_a_row_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="4 values for 5 columns"):
        Row(COLUMNS, VALUES[:4])
    with pytest.raises(ValueError, match="repeated"):
        Columns(["pid", "mode", "pid"])


def test_rows_pickle_with_their_columns_shared() -> None:
    a, b = pickle.loads(pickle.dumps([row(), Row(COLUMNS, ("x", "y", False, 1, [2]))]))
    assert a == AS_DICT and b["blocked_by"] == [2]
    assert a._columns is b._columns  # one Columns per pickle, as per result


def test_plain_gives_json_encoders_a_dict() -> None:
    assert type(plain(row())) is dict and plain(row()) == AS_DICT
    assert json.loads(json.dumps(plain(row()))) == AS_DICT
    for other in ({"a": 1}, "text", None, [1]):
        assert plain(other) is other


def pg_lock(content: Any) -> Lock:
    backend = PgBackend(pid=4242, user="app")
    pg = PgLock("db", "advisory", "ExclusiveLock", True, "postgres", backend)
    return Lock("pg:x", "postgres", "pg_locks", "x", None, content=content, facts=pg)


def test_a_lock_with_a_row_hashes_records_and_shows_as_with_the_dict() -> None:
    with_row, with_dict = pg_lock(row()), pg_lock(dict(AS_DICT))
    assert lock_hash(with_row) == lock_hash(with_dict) is not None
    # A recording writes the row as the dict (and reads a dict back).
    back = loads_line(dumps_line(with_row))
    assert back == with_row and type(back.content) is dict and back.content == AS_DICT
    assert decode(encode(with_row)).content == AS_DICT
    assert str(_render_content(with_row)) == str(_render_content(with_dict))
    assert dataclasses.replace(with_row, name="y").content is with_row.content


RECORD = b'{"pid": 100, "session_id": "main", "nested": {"a": [1, 2.5, null]}, "ok": true}'
RECORD_DICT = {"pid": 100, "session_id": "main", "nested": {"a": [1, 2.5, None]}, "ok": True}


def test_a_document_reads_as_the_record_it_holds() -> None:
    doc = Document(RECORD)
    assert isinstance(doc, Mapping)
    assert doc["pid"] == 100 and doc.get("session_id") == "main"
    assert doc.get("nope") is None and doc.get("nope", 3) == 3
    assert "ok" in doc and "nope" not in doc
    assert list(doc) == list(RECORD_DICT) and len(doc) == 4
    assert dict(doc) == {**doc} == dict(doc.items()) == RECORD_DICT
    assert list(doc.keys()) == list(RECORD_DICT) and 100 in doc.values()
    assert doc == RECORD_DICT and operator.eq(RECORD_DICT, doc)
    assert doc != {**RECORD_DICT, "pid": 1} and doc == Document(RECORD + b"\n")
    with pytest.raises(KeyError):
        doc["nope"]
    with pytest.raises(TypeError):
        hash(doc)
    # Each read decodes afresh: what one caller changes, the next does not see.
    doc.as_dict()["pid"] = 5
    assert doc["pid"] == 100
    assert repr(doc) == repr(RECORD_DICT)


def test_a_document_pickles_as_its_bytes_and_is_plain_as_a_dict() -> None:
    doc = Document(RECORD)
    back = pickle.loads(pickle.dumps(doc))
    assert type(back) is Document and back == RECORD_DICT
    assert back._raw == RECORD  # the bytes travel, not the decoded record
    assert type(plain(doc)) is dict and json.loads(json.dumps(plain(doc))) == RECORD_DICT


def test_the_file_source_keeps_a_whole_record_as_its_bytes_and_nothing_else() -> None:
    """A decoder that keeps the record whole (clawdbot) gets it as a Document of
    the bytes read (a BOM before it dropped); what is not a JSON object (a pid
    file, a JSON number, a record that cannot be read) keeps its own content."""
    record = b'{"pid": 4000000, "session_id": "main", "acquired_at": "2026-11-24T10:00:00Z"}'
    path = "/srv/project/memory/.lock"
    for data in (record, b"\xef\xbb\xbf" + record):
        lock = decode_file(LockFile(path, data, 0.0, "0" * 64))
        assert lock.format == "clawdbot" and type(lock.content) is Document
        assert lock.content == orjson.loads(record)
        assert lock.content.as_dict() == json.loads(record)
    for data, content in ((b"4242\n", None), (b"[1, 2]", [1, 2]), (b"not json", "not json")):
        lock = decode_file(LockFile("/srv/project/app.pid", data, 0.0, "0" * 64))
        assert type(lock.content) is not Document
        if content is not None:
            assert lock.content == content


def test_a_pretty_printed_record_is_kept_without_its_indentation() -> None:
    """Indentation is a third of a pretty-printed record: the board keeps the same
    record (keys in order, every value as read: unicode, a float, a 2**64 that
    orjson reads as a float, nesting) in fewer bytes. A compact record is kept
    as the very bytes read."""
    record = {
        "pid": 4000000,
        "session_id": "main é☃",
        "acquired_at": "2026-11-24T10:00:00Z",
        "ratio": 0.1,
        "big": 2**64,
        "nested": {"z": [1, {"a": None}], "a": True},
    }
    pretty = json.dumps(record, indent=4, ensure_ascii=False).encode()
    lock = decode_file(LockFile("/srv/project/memory/.lock", pretty, 0.0, "0" * 64))
    assert lock.format == "clawdbot" and type(lock.content) is Document
    assert len(lock.content._raw) < len(pretty) * 2 // 3
    assert list(lock.content.as_dict().items()) == list(orjson.loads(pretty).items())
    assert json.dumps(lock.content.as_dict()) == json.dumps(orjson.loads(pretty))
    compact = orjson.dumps(record | {"big": 1})
    kept = decode_file(LockFile("/srv/project/memory/.lock", compact, 0.0, "0" * 64)).content
    assert type(kept) is Document and kept._raw == compact


def test_a_file_lock_with_a_document_records_and_shows_as_with_the_dict() -> None:
    lock = Lock("file:/x", "file", "clawdbot", "x", "/x", content=Document(RECORD))
    back = loads_line(dumps_line(lock))
    assert type(back.content) is dict and back.content == RECORD_DICT
    assert str(_render_content(lock)) == str(
        _render_content(dataclasses.replace(lock, content=RECORD_DICT))
    )


def test_compacted_records_keep_no_more_memory_than_their_bytes() -> None:
    """What orjson.dumps returns keeps its whole 4 KiB buffer resident: kept for
    every lock of a large tree, it cost more than the record it replaced. In a
    process of its own, 20,000 records kept must cost well under a KiB each."""
    import subprocess
    import sys

    script = """
import json, psutil
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.files.decoders.base import LockFile
record = {"pid": 4000000, "session_id": "main", "acquired_at": "2026-11-24T10:00:00Z",
          "hostname": "bench", "operation": "write:tasks.json"}
files = [LockFile(f"/p/{n}/memory/.lock", json.dumps(record | {"n": n}, indent=2).encode(),
                  0.0, "0" * 64) for n in range(20_000)]
decode_file(files[0])
before = psutil.Process().memory_info().rss
kept = [decode_file(file).content for file in files]
print((psutil.Process().memory_info().rss - before) / len(kept))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert float(out.stdout) < 1024, out.stdout
