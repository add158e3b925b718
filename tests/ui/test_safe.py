"""What lock files and servers say never drives the operator's terminal."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from lockwatch.model.changes import judge
from lockwatch.model.process import StaticProcesses
from lockwatch.sources.files.decoders import decode_file
from lockwatch.ui.detail import describe
from lockwatch.ui.safe import clean
from tests.conftest import LOCAL_HOST, NOW, lock_file

HOSTILE = "x\x1b]0;PWNED\x07 \x1b[2J\u202eevil"


def test_clean_spells_out_controls_and_bidi_overrides() -> None:
    assert clean(HOSTILE) == "x\\x1b]0;PWNED\\x07 \\x1b[2J\\u202eevil"
    assert clean("two\nlines") == "two\\x0alines"
    assert clean("two\nlines", keep_newlines=True) == "two\nlines"
    assert clean("plain name-1.lock") == "plain name-1.lock"


def test_the_detail_pane_of_a_hostile_lock_writes_no_escape() -> None:
    lock = decode_file(lock_file(f"/srv/{HOSTILE}.lock", HOSTILE + "\n"))
    entry = judge([lock], StaticProcesses(), NOW, LOCAL_HOST)[0]
    out = StringIO()
    Console(file=out, color_system=None, width=120).print(
        describe(entry.lock, entry.verdict, (), NOW)
    )
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b[2J" in text  # shown, spelled out
