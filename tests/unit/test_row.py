"""`Row`: a result set's row kept compact, read as a mapping; written as a dict."""

from __future__ import annotations

import dataclasses
import json
import operator
import pickle
from collections.abc import Mapping
from typing import Any

import pytest

from lockwatch.actions.run import lock_hash
from lockwatch.model.codec import decode, dumps_line, encode, loads_line
from lockwatch.model.lock import Lock
from lockwatch.model.pg import PgBackend, PgLock
from lockwatch.model.row import Columns, Row, plain
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
    return Lock("pg:x", "postgres", "pg_locks", "x", None, content=content, pg=pg)


def test_a_lock_with_a_row_hashes_records_and_shows_as_with_the_dict() -> None:
    with_row, with_dict = pg_lock(row()), pg_lock(dict(AS_DICT))
    assert lock_hash(with_row) == lock_hash(with_dict) is not None
    # A recording writes the row as the dict (and reads a dict back).
    back = loads_line(dumps_line(with_row))
    assert back == with_row and type(back.content) is dict and back.content == AS_DICT
    assert decode(encode(with_row)).content == AS_DICT
    assert str(_render_content(with_row)) == str(_render_content(with_dict))
    assert dataclasses.replace(with_row, name="y").content is with_row.content
