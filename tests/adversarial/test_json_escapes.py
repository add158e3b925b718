"""Hostile characters in lock names reach no terminal through the JSON either.

A file name may carry C1 controls (U+009B is CSI: a terminal acts on what
follows) or bidi overrides (U+202E turns the line around). `ls --json` and
serve's /v1/locks write them as `\\uXXXX` escapes: the same strings to a JSON
reader, nothing raw on a screen that `cat`s or `curl`s the document.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from lockwatch.model.report import records_json_array

HOSTILE = "evil\u009b31m\u202egnp.lock"
RAW = ("\u009b", "\u202e")


def test_records_json_array_escapes_what_a_terminal_would_act_on() -> None:
    records = [{"name": HOSTILE, "path": "/x/caf\u00e9.lock", "n": 1}]
    data = records_json_array(records)
    text = data.decode("utf-8")
    assert not any(char in text for char in RAW), text
    assert "\\u009b" in text and "\\u202e" in text
    assert "caf\u00e9" in text  # printable non-ASCII stays as it is
    assert orjson.loads(data) == records  # the same strings to a JSON reader


def test_ls_json_of_a_hostile_file_name_prints_no_raw_control(tmp_path: Path) -> None:
    (tmp_path / HOSTILE).write_text(f"{os.getpid()}\n")
    out = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", str(tmp_path)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode("utf-8")
    assert not any(char in text for char in RAW)
    names = [lock["name"] for lock in json.loads(text)["locks"]]
    assert any("\u202e" in name for name in names)  # decoded back, whole


def _escaped_whole(data: bytes) -> bytes:
    """unprintable_escaped as it was: the whole document decoded and searched."""
    import re

    def one(match: re.Match[str]) -> str:
        char = match.group()
        if char.isprintable():
            return char
        code = ord(char)
        if code < 0x10000:
            return f"\\u{code:04x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

    return re.sub(r"[^\t\n\r\x20-\x7e]", one, data.decode("utf-8")).encode("utf-8")


def test_a_large_document_is_escaped_piece_by_piece_as_it_was_whole() -> None:
    """Pieces of a large document are escaped apart (report._PIECE): a character
    across a piece's end, at either end of the document, or a DEL in an otherwise
    ASCII piece, comes out as the whole document's escape gave it, from
    records_json_array (orjson's compact JSON) and unprintable_escaped (any JSON,
    indented too) alike."""
    from lockwatch.model import report

    odd = ["\u2026", "\u00e9", "\u009b", "\u202e", "\U0001f512", "\x7f", "\u4e2d", "\n"]
    size = report._PIECE
    for width in range(1, 5):
        for char in odd:
            for shift in range(-4, 2):
                text = "a" * (size + shift) + char + "b" * (size - 1) + char + "\x7f" + "c" * 50
                records: list[dict[str, Any]] = [{"a": text, "b": "\u2026" + "d" * (size * 2)}]
                data = orjson.dumps(records)
                assert records_json_array(records) == _escaped_whole(data), (char, shift)
                assert report.unprintable_escaped(data) == _escaped_whole(data), (char, shift)
                indented = orjson.dumps(records, option=orjson.OPT_INDENT_2)
                assert report.unprintable_escaped(indented) == _escaped_whole(indented)
            records = [{"a": char * width, "b": "\u00e9"}]  # not ASCII: looked at
            data = orjson.dumps(records)
            assert records_json_array(records) == _escaped_whole(data)
            assert report.unprintable_escaped(data) == _escaped_whole(data)
    ascii_only = orjson.dumps(["x" * (3 * size)])
    assert report.unprintable_escaped(ascii_only) is ascii_only


def test_indented_json_with_a_non_ascii_character_still_parses() -> None:
    """`ls --json` on a terminal re-indents the document: its newlines are JSON's
    whitespace, not characters to escape (escaped, they made it unparseable)."""
    from lockwatch.model import report

    records = [{"name": "caf\u00e9 \u2026 \u202e", "pid": 1, "tab": "a\tb"}]
    indented = orjson.dumps(records, option=orjson.OPT_INDENT_2)
    escaped = report.unprintable_escaped(indented)
    assert escaped.count(b"\n") == indented.count(b"\n")
    assert b"\\u202e" in escaped and b"\xe2\x80\xae" not in escaped
    assert json.loads(escaped) == records


def test_records_from_shared_parts_are_written_as_the_plain_ones() -> None:
    """A leader's lists and dicts written once (report.shared_parts) give its
    followers' records the very bytes the plain records give, escapes included."""
    from datetime import UTC, datetime

    from lockwatch.model.report import shared_parts

    leader: dict[str, Any] = {
        "id": "pg:a",
        "holder": {"pid": 1, "process": {"cmdline": ["x", HOSTILE, "caf\u00e9 \u2026"]}},
        "reasons": [
            {"code": "idle", "message": "since \u2026", "at": datetime(2026, 1, 2, tzinfo=UTC)}
        ],
        "scope": [],
        "acquired_at": datetime(2026, 1, 1, tzinfo=UTC),
        "advisory_key": {"form": "bigint", "key": 1},
    }
    followers = [{**leader, "id": f"pg:{n}", "advisory_key": {"form": "pair"}} for n in range(3)]
    base = shared_parts(leader)
    shared = [{**base, "id": f"pg:{n}", "advisory_key": {"form": "pair"}} for n in range(3)]
    assert records_json_array([leader, *shared]) == records_json_array([leader, *followers])
