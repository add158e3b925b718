"""One list of hostile names, through every way lockwatch shows text.

The sanitiser itself, the `lockwatch ls` table and its error lines, the break
confirmation, the dashboard's cells and detail pane, and the Markdown incident
report must all leave the same characters out of what reaches a terminal or a
paste: each output character is checked by its Unicode category, so a view that
forgets the sanitiser fails here whatever character slipped through.
"""

from __future__ import annotations

import html
import json
import os
import unicodedata
from io import StringIO
from pathlib import Path

import click.testing
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.incident import Incident, capture, escape, to_markdown
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.text import ESCAPED_CATEGORIES, terminal_safe
from lockwatch.sources.files.decoders import decode_file
from lockwatch.ui.cells import COLUMNS, cell, fit
from lockwatch.ui.detail import describe
from lockwatch.ui.safe import clean, safe
from tests.conftest import LOCAL_HOST, NOW, lock_file, run_cli
from tests.unit.test_incident import cells_per_row, entries, markdown_it, tables

# Spelled out here, not imported: a sanitiser that quietly dropped a category
# must fail these tests, not redefine what they check.
MUST_ESCAPE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
DEAD_PID = 999_999
NOT_UTF8 = os.fsdecode(b"\xff\xfe.lock")  # '\udcff\udcfe.lock'
HOSTILE: dict[str, str] = {
    "erase screen": "\x1b[2J",
    "set title": "\x1b]0;title\x07",
    "c1 csi": "\x9b31m",
    "rlo": "evil\u202egpj.exe",
    "isolates": "\u2066lri\u2069 \u2067rli\u2069 \u2068fsi\u2069",
    "marks": "\u200elrm\u200f \u061calm \u202alre\u202c \u202brle\u202c \u202dlro\u202c",
    "zero width space": "zero\u200bwidth",
    "bom": "\ufeffbom",
    "line separators": "line\u2028sep\u2029para",
    "nul": "nul\x00byte",
    "del": "del\x7fete",
    "tab": "tab\there",
    "newline": "new\nline",
    "not utf-8": NOT_UTF8,
    "tag characters": "ok\U000e0041\U000e0042",
    "private use": "icon\ue000",
    "unassigned": "u\u0378nassigned",
    "markdown": "# `tick` a|b *em*",
    # 10,000 characters with the hostile part at the end, past where views cut.
    "very long": "long-" + "n" * 9_990 + "\x1b[2J\u202e",
}
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
SPELLED = {
    "\x1b[2J": "\\x1b[2J",
    "\x9b31m": "\\x9b31m",
    "evil\u202egpj.exe": "evil\\u202egpj.exe",
    "zero\u200bwidth": "zero\\u200bwidth",
    "\ufeffbom": "\\ufeffbom",
    "line\u2028sep\u2029para": "line\\u2028sep\\u2029para",
    "nul\x00byte": "nul\\x00byte",
    "del\x7fete": "del\\x7fete",
    "tab\there": "tab\\x09here",
    "new\nline": "new\\x0aline",
    NOT_UTF8: "\\xff\\xfe.lock",
    "ok\U000e0041": "ok\\U000e0041",
    "icon\ue000": "icon\\ue000",
    "u\u0378nassigned": "u\\u0378nassigned",
}


def escaped_characters(text: str, allowed: str = "") -> list[str]:
    """Characters of `text` that must never be shown as themselves."""
    return [ch for ch in text if ch not in allowed and unicodedata.category(ch) in MUST_ESCAPE]


def lines(text: str) -> list[str]:
    """Split at newlines only: str.splitlines() also splits at U+2028, U+0085 and
    other separators, and would drop the very characters that must not leak."""
    return text.split("\n")


def file_name_safe(text: str) -> bool:
    return "\x00" not in text and "/" not in text and len(os.fsencode(text)) < 200


cases = pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))


# -- the sanitiser --------------------------------------------------------------------


@cases
def test_nothing_escaped_survives_the_sanitiser(text: str) -> None:
    shown = terminal_safe(text)
    assert escaped_characters(shown) == []
    assert terminal_safe(shown) == shown  # what it shows is already safe to show


@cases
def test_multi_line_text_keeps_only_newlines_and_tabs(text: str) -> None:
    shown = terminal_safe(text, keep_newlines=True)
    assert escaped_characters(shown, allowed="\n\t") == []
    assert shown.count("\n") == text.count("\n") and shown.count("\t") == text.count("\t")


@pytest.mark.parametrize(("raw", "spelled"), list(SPELLED.items()))
def test_spelled_out_as_visible_ascii(raw: str, spelled: str) -> None:
    assert terminal_safe(raw) == spelled


def test_the_escaped_categories() -> None:
    assert ESCAPED_CATEGORIES == MUST_ESCAPE


def test_every_bidi_control_is_escaped() -> None:
    for ch in BIDI:
        assert terminal_safe(ch) == f"\\u{ord(ch):04x}"


def test_spaces_and_ordinary_text_are_kept() -> None:
    for text in ("plain name-1.lock", "café 漢字 🙂", "nb\u00a0sp", "ideo\u3000space", "a\u0301"):
        assert terminal_safe(text) == text


def test_the_fast_path_is_exact() -> None:
    """`terminal_safe` returns printable text untouched: that is only right if
    str.isprintable() is False for every escaped character (and for no other
    but the spaces), in this Python's Unicode database."""
    for code in range(0x110000):
        ch = chr(code)
        category = unicodedata.category(ch)
        wanted = category not in MUST_ESCAPE and (category != "Zs" or ch == " ")
        assert ch.isprintable() == wanted, (hex(code), category)


def test_surrogates_outside_surrogateescape_are_code_points() -> None:
    assert terminal_safe("\ud800") == "\\ud800"
    assert terminal_safe("\udc7f") == "\\udc7f"
    assert terminal_safe("\udc80") == "\\x80"


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_no_escaped_category_survives_any_text(text: str) -> None:
    assert escaped_characters(terminal_safe(text)) == []
    assert escaped_characters(terminal_safe(text, keep_newlines=True), allowed="\n\t") == []
    terminal_safe(text).encode("utf-8")  # no lone surrogate left to choke an encoder


@given(st.text(alphabet=st.characters(categories=("L", "M", "N", "P", "S", "Zs"))))
def test_letters_digits_punctuation_and_spaces_pass_unchanged(text: str) -> None:
    assert terminal_safe(text) == text
    assert terminal_safe(text, keep_newlines=True) == text


# -- the CLI ------------------------------------------------------------------------


def lock_name(text: str) -> str:
    number = list(HOSTILE.values()).index(text)
    return f"{text}.lock" if file_name_safe(text) else f"case-{number}.lock"


def hostile_dir(root: Path, *, foreign: bool) -> Path:
    """One lock per hostile text: named with it where a file name can hold it,
    and with it as actor in every case (and as host, if `foreign`: a lock
    written elsewhere, which `ls` explains in its reasons). Dead holders."""
    root.mkdir()
    for text in HOSTILE.values():
        content = {"pid": DEAD_PID, "actor": text, "acquired_at": "2026-01-01T00:00:00Z"}
        if foreign:
            content["hostname"] = text
        with open(os.fsencode(root) + b"/" + os.fsencode(lock_name(text)), "w") as handle:
            handle.write(json.dumps(content))
    return root


def test_ls_table_shows_every_hostile_name_spelled_out(tmp_path: Path) -> None:
    root = hostile_dir(tmp_path / "locks", foreign=True)
    code, out, err = run_cli("ls", "--long", str(root))
    assert code == 0, err
    for line in lines(out):
        assert escaped_characters(line) == [], line
    assert len(lines(out)) > len(HOSTILE)  # every lock, no row split in two
    for text in HOSTILE.values():
        assert terminal_safe(text) in out  # the whole holder, as the terminal shows it


def test_ls_error_lines_on_stderr(tmp_path: Path) -> None:
    missing = [str(tmp_path / text) for text in HOSTILE.values() if file_name_safe(text)]
    code, _, err = run_cli("ls", *missing)
    assert code != 0
    assert err.count("\n") >= len(missing)
    for line in lines(err):
        assert escaped_characters(line) == [], line
    for path in missing:
        assert terminal_safe(path) in err


@pytest.fixture
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No lockwatch.toml, user config or state from this machine; a stdin that
    says it is a terminal, so `break` asks."""
    home = tmp_path / "home"
    home.mkdir()
    for key in list(os.environ):
        if key.startswith(("PG", "LOCKWATCH_", "SUDO_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".state"))
    monkeypatch.chdir(home)
    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda self: True)
    return tmp_path / "audit.jsonl"


def break_asking(target: str, log: Path) -> click.testing.Result:
    from lockwatch.cli import cli

    # --force: invalid locks (a surrogate cannot be JSON) are asked about too.
    result = click.testing.CliRunner().invoke(
        cli,
        ["break", target, "--reason", "r", "--force", "--audit-log", str(log)],
        input="n\n",
    )
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@cases
def test_break_confirmation_spells_out_the_lock(text: str, tmp_path: Path, no_config: Path) -> None:
    root = hostile_dir(tmp_path / "locks", foreign=False)
    result = break_asking(
        os.fsdecode(os.fsencode(root) + b"/" + os.fsencode(lock_name(text))), no_config
    )
    assert "About to break:" in result.stderr, result.stderr
    assert result.exit_code == 1 and "cancelled" in result.stderr, result.stderr
    for line in lines(result.stderr):
        assert escaped_characters(line) == [], line
    assert terminal_safe(text) in result.stderr


@cases
def test_break_error_lines(text: str, tmp_path: Path, no_config: Path) -> None:
    """A target that is gone (refused, audited) and one that is a directory
    (a usage error): both name the target on stderr."""
    name = text.replace("\x00", "0")[:100]
    targets = [f"{tmp_path}/missing/{name}"]
    if file_name_safe(text):
        os.mkdir(os.fsencode(tmp_path) + b"/" + os.fsencode(text))
        targets.append(f"{tmp_path}/{text}")
    for target in targets:
        result = break_asking(target, no_config)
        assert result.exit_code in (1, 2) and terminal_safe(target) in result.stderr, result.stderr
        for line in lines(result.stderr):
            assert escaped_characters(line) == [], line


# -- the dashboard ------------------------------------------------------------------


def hostile_lock(text: str) -> Entry:
    content = {"pid": DEAD_PID, "hostname": text, "actor": text, "operation": text}
    lock = decode_file(lock_file(f"/srv/run/{text}.lock", content))
    return judge([lock], StaticProcesses(), NOW, LOCAL_HOST)[0]


@cases
def test_dashboard_cells(text: str) -> None:
    entry = hostile_lock(text)
    for column in COLUMNS:
        for width in (8, 40, 200):
            shown = fit(cell(column.key, entry.lock, entry.verdict, NOW, width), width)
            assert escaped_characters(shown) == [], (column.key, shown)
    wide = fit(cell("name", entry.lock, entry.verdict, NOW, 30_000), 30_000)
    assert wide.rstrip() == terminal_safe(entry.lock.name)


@cases
def test_dashboard_text_and_detail_pane(text: str) -> None:
    assert clean(text) == terminal_safe(text)
    assert safe(f"[bold]{text}").plain == "[bold]" + terminal_safe(text)  # no markup either
    assert escaped_characters(safe(text, keep_newlines=True).plain, allowed="\n\t") == []
    entry = hostile_lock(text)
    out = StringIO()
    Console(file=out, color_system=None, width=120).print(
        describe(entry.lock, entry.verdict, (), NOW)
    )
    for line in lines(out.getvalue()):
        assert escaped_characters(line) == [], line


# -- the Markdown incident report ---------------------------------------------------


def incident_of(text: str) -> Incident:
    path = f"/srv/run/{text}.lock"
    lock = decode_file(lock_file(path, {"pid": DEAD_PID, "actor": text, "host": LOCAL_HOST}))
    board = Board(LOCAL_HOST)
    board.apply(
        ChangeSet(
            "files",
            NOW,
            full=True,
            upserts=entries([lock]),
            statuses=(SourceStatus("file", text, "error", reason=text),),
            errors=(ScanError(text, text),),
        )
    )
    return capture(board, NOW, text, filter_text=text)


@cases
def test_markdown_report(text: str) -> None:
    report = to_markdown(incident_of(text))
    for line in lines(report):
        assert escaped_characters(line) == [], line
    plain = to_markdown(incident_of("plain"))
    # The same document as for a plain name: no line, cell or heading added.
    assert len(lines(report)) == len(lines(plain))
    assert cells_per_row(report) == cells_per_row(plain) == {6, 4}
    assert [line for line in lines(report) if line.startswith("#")] == [
        line.replace("plain", escape(text, 120)) if line.startswith("# ") else line
        for line in lines(plain)
        if line.startswith("#")
    ]
    attention = tables(report)[0]
    name = text if len(text) <= 80 else text[:79] + "…"
    assert attention[1][2] == terminal_safe(name)  # the reader sees what a terminal shows


def inert(rendered: str) -> str:
    """What a reader sees of escaped text: a code span (the report's way of
    keeping text inert) is unwrapped; any other tag stays and fails."""
    return rendered.removeprefix("<code>").removesuffix("</code>")


@cases
def test_markdown_escape_renders_as_the_terminal_shows(text: str) -> None:
    rendered = inert(markdown_it.MarkdownIt("gfm-like").renderInline(escape(text)))
    assert "<" not in rendered
    assert html.unescape(rendered) == terminal_safe(text)


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40))
def test_any_markdown_text_renders_as_the_terminal_shows(text: str) -> None:
    rendered = inert(markdown_it.MarkdownIt("gfm-like").renderInline(escape(text)))
    assert "<" not in rendered
    assert html.unescape(rendered) == terminal_safe(text)
