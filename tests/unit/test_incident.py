"""Incident snapshots: what `capture` keeps, the JSON contract, the Markdown report.

Boards are built as the dashboard builds them: lock files decoded, judged with
`judge()` against the fixed process table (pid 100 alive, everything else dead),
and applied as change sets; Postgres locks come from pg_locks rows.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta, timezone
from html.parser import HTMLParser
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockwatch.model.blocking import BlockingTree, build
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.events import Event, EventKind
from lockwatch.model.incident import (
    INCIDENT_SCHEMA,
    Incident,
    capture,
    escape,
    to_json,
    to_markdown,
)
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_record, ls_json, records_json_array
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.postgres.records import to_locks
from tests.conftest import LOCAL_HOST, NOW, ago, alive, iso, lock_file
from tests.sources.test_pg_records import SERVER, row, sessions_of

markdown_it = pytest.importorskip("markdown_it")

PROJECT = "/home/dev/proj"
RUNNING = f"{PROJECT}/.loops/.running"
TOWER_DIR = "/srv/fleet/logs/locks"
LIVE, DEAD = 100, 200
HOSTILE = (
    "a|b",
    "[x](http://evil)",
    "<script>alert(1)</script>",
    "line1\nline2",
    "`rm -rf /`",
    "*bold* _em_ ~~gone~~",
    "![img](http://evil/x.png)",
    "http://evil.example/path",
    "www.evil.com",
    "evil.com",
    "root@evil.com",
    "&lt;b&gt; &amp;",
    "\\|",
    "right\u202eto-left",
    "$\\href{x}{y}$",
)

# -- building boards -----------------------------------------------------------------


def tower(
    name: str,
    *,
    heartbeat_ago: float = 10.0,
    created_ago: float = 600.0,
    ttl: int = 900,
    pid: int = LIVE,
    at: datetime = NOW,
) -> Lock:
    doc = {
        "lock_version": "v1",
        "lock_name": name,
        "request_id": "req_1",
        "actor": "deployer",
        "intent": "deploy-app",
        "intent_version": "1.2.0",
        "host_id": LOCAL_HOST,
        "pid": pid,
        "created_at": iso(at - timedelta(seconds=created_ago)),
        "last_heartbeat_at": iso(at - timedelta(seconds=heartbeat_ago)),
        "ttl_seconds": ttl,
    }
    return decode_file(lock_file(f"{TOWER_DIR}/{name}.lock", doc))


def loop(
    name: str,
    scope: list[str] | None = None,
    *,
    pid: int = LIVE,
    started_ago: float = 120.0,
    file: str | None = None,
) -> Lock:
    doc = {
        "loop_name": name,
        "scope": [f"{PROJECT}/src"] if scope is None else scope,
        "pid": pid,
        "started_at": iso(ago(started_ago)),
    }
    return decode_file(lock_file(f"{RUNNING}/{file or 'x' + str(abs(hash(name)))}.lock", doc))


def generic(path: str, content: Any) -> Lock:
    return decode_file(lock_file(path, content, mtime=ago(30)))


def pg_locks() -> list[Lock]:
    """4242 holds an advisory lock; 4243 waits on it, 4244 on both."""
    rows = [
        row(pid=4242, usename="app", state="idle in transaction", state_age=30.0),
        row(pid=4243, granted=False, wait_age=12.0, blocked_by=[4242], usename="batch"),
        row(pid=4244, granted=False, wait_age=5.0, blocked_by=[4242, 4243], usename="batch"),
    ]
    return to_locks(rows, sessions_of(rows), server=SERVER, polled_at=NOW, idle_after=60.0)


def entries(locks: list[Lock], at: datetime = NOW) -> tuple[Entry, ...]:
    return tuple(judge(locks, StaticProcesses(alive(LIVE)), at, LOCAL_HOST))


def file_locks() -> list[Lock]:
    return [
        tower("deploy-app"),
        tower("old-deploy", heartbeat_ago=2000.0, created_ago=3000.0),
        tower("late-deploy", heartbeat_ago=400.0),
        loop("fix-bugs", [f"{PROJECT}/src"], file="fix-bugs"),
        loop("refactor", [f"{PROJECT}/src/lib"], file="refactor"),
        loop("docs-sweep", [f"{PROJECT}/docs"], pid=DEAD, started_ago=9000.0, file="docs"),
        generic("/srv/run/broken.lock", b"\x00\x01binary"),
        generic("/srv/run/quiet.lock", {"pid": LIVE, "acquired_at": iso(ago(45))}),
    ]


STATUSES = (
    SourceStatus("file", "/srv", "watching", updated_at=NOW),
    SourceStatus("postgres", SERVER, "connected", updated_at=NOW - timedelta(seconds=1)),
)
ERRORS = (ScanError("/srv/private", "permission denied"),)


def busy_board(extra: list[Lock] | None = None) -> Board:
    board = Board(LOCAL_HOST)
    board.apply(
        ChangeSet(
            "files",
            NOW,
            statuses=STATUSES[:1],
            full=True,
            upserts=entries([*file_locks(), *(extra or [])]),
            errors=ERRORS,
        )
    )
    board.apply(
        ChangeSet(
            f"pg:{SERVER}", NOW, statuses=STATUSES[1:], full=True, upserts=entries(pg_locks())
        )
    )
    return board


# -- capture ---------------------------------------------------------------------------


def test_capture_keeps_every_lock_with_its_shown_verdict() -> None:
    board = busy_board()
    incident = capture(board, NOW, LOCAL_HOST, filter_text="state:stale")
    assert len(incident.entries) == len(board) == 11
    for lock, verdict in incident.entries:
        assert lock is board.entries[lock.id].lock
        assert verdict is board.verdict(lock.id)
    shown = {lock.name: verdict for lock, verdict in incident.entries}
    assert "scope_conflict" in shown["fix-bugs"].codes  # the board's, not the feed's
    assert incident.statuses == STATUSES
    assert incident.errors == ERRORS
    assert [server for server, _ in incident.trees] == [SERVER]
    assert incident.trees[0][1] is board.blocking_trees()[SERVER]
    assert incident.conflicts == tuple(board.conflicts())
    assert incident.events == tuple(board.events)
    assert (incident.at, incident.host, incident.filter_text) == (NOW, LOCAL_HOST, "state:stale")


@pytest.mark.parametrize(("wanted", "kept"), [(3, 3), (0, 0), (-1, 0), (10_000, 15)])
def test_capture_keeps_the_most_recent_events(wanted: int, kept: int) -> None:
    board = Board(LOCAL_HOST)
    for i in range(15):
        board.note(Event(NOW + timedelta(seconds=i), EventKind.BROKEN, None, f"n{i}", "file"))
    events = capture(board, NOW, LOCAL_HOST, events=wanted).events
    assert len(events) == kept
    assert events == tuple(board.events)[len(board.events) - kept :]


def test_capture_is_a_snapshot_the_board_can_move_on_from() -> None:
    board = busy_board()
    incident = capture(board, NOW, LOCAL_HOST)
    board.apply(ChangeSet("files", NOW + timedelta(seconds=5), full=True))
    assert len(board) == 3 and len(incident.entries) == 11
    assert len(incident.events) < len(board.events)


def test_capture_of_10k_locks_copies_references() -> None:
    """Capture is a copy of references, each lock with the verdict the board shows
    (its speed, against that copy, is benchmarks/bench_incident.py's)."""
    locks = [
        generic(f"/srv/many/{i:05d}.lock", {"pid": LIVE if i % 3 else DEAD}) for i in range(10_000)
    ]
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, full=True, upserts=entries(locks)))
    incident = capture(board, NOW, LOCAL_HOST)
    assert len(incident.entries) == 10_000
    for (lock, verdict), entry in zip(incident.entries, board.entries.values(), strict=True):
        assert lock is entry.lock and verdict is board.verdict(lock.id)
    states = {verdict.state for _, verdict in incident.entries}
    assert states == {State.ACTIVE, State.STALE}


def test_capture_shows_the_boards_scope_conflicts() -> None:
    incident = capture(busy_board(), NOW, LOCAL_HOST)
    shown = {lock.id: verdict for lock, verdict in incident.entries}
    conflicted = [lock_id for lock_id, _ in incident.conflicts]
    assert len(conflicted) == 2
    for lock_id in conflicted:
        assert any(r.code == "scope_conflict" for r in shown[lock_id].reasons)


# -- JSON ------------------------------------------------------------------------------


def document(incident: Incident) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(to_json(incident))
    return parsed


def test_json_shape() -> None:
    incident = capture(busy_board(), NOW, LOCAL_HOST, filter_text="name:deploy")
    raw = to_json(incident)
    assert raw.endswith(b"\n") and b'\n  "schema"' in raw  # indented for humans
    doc = orjson.loads(raw)
    assert list(doc) == [
        "schema", "generated_at", "host", "filter", "summary", "sources", "errors", "locks",
        "blocking", "conflicts", "events",
    ]  # fmt: skip
    assert doc["schema"] == INCIDENT_SCHEMA == "lockwatch.incident/1"
    assert doc["generated_at"] == "2026-11-21T12:00:00Z"
    assert (doc["host"], doc["filter"]) == (LOCAL_HOST, "name:deploy")
    assert doc["summary"] == {
        "locks": 11,
        "states": {"active": 6, "stale": 2, "invalid": 1, "waiting": 2, "free": 0, "unknown": 0},
        "waiting_sessions": 2,
        "scope_conflicts": 1,
        "errors": 1,
    }
    assert [lock["id"] for lock in doc["locks"]] == sorted(lock["id"] for lock in doc["locks"])
    (conflict_a, conflict_b) = doc["conflicts"]
    assert {conflict_a["name"], conflict_b["name"]} == {"fix-bugs", "refactor"}
    assert conflict_a["conflicts_with"] == [conflict_b["id"]]
    (tree,) = doc["blocking"]
    assert tree["server"] == SERVER
    (root,) = tree["roots"]
    assert (root["id"], root["blocks_directly"], root["blocks_in_total"]) == (4242, 2, 2)
    assert tree["cycles"] == []
    kinds = {event["kind"] for event in doc["events"]}
    assert kinds == {"appeared", "started_waiting"}
    assert all(event["at"] == "2026-11-21T12:00:00Z" for event in doc["events"])
    assert set(doc["events"][0]) == {"at", "kind", "lock_id", "name", "source", "detail"}


def test_json_matches_ls_json() -> None:
    """Locks, sources, errors and blocking trees are exactly what `ls --json` writes."""
    incident = capture(busy_board(), NOW, LOCAL_HOST)
    doc = document(incident)
    ordered = sorted(incident.entries, key=lambda pair: pair[0].id)
    listed = ls_json(NOW, LOCAL_HOST, ordered, ERRORS, STATUSES, incident.trees)
    for key in ("locks", "sources", "errors", "blocking"):
        assert doc[key] == listed[key], key
    expected = orjson.loads(records_json_array([lock_record(k, v, NOW) for k, v in ordered]))
    assert doc["locks"] == expected


def test_json_ages_count_to_the_snapshot() -> None:
    """A board keeps an unchanged lock's first verdict: its age is counted again."""
    board = busy_board()
    later = NOW + timedelta(seconds=90)
    doc = document(capture(board, later, LOCAL_HOST))
    by_id = {lock["id"]: lock for lock in doc["locks"]}
    for lock_id, entry in board.entries.items():
        record = orjson.loads(
            records_json_array([lock_record(entry.lock, board.verdict(lock_id), later)])
        )[0]
        age = record.pop("age_seconds")
        got = dict(by_id[lock_id])
        # A granted Postgres lock has no age at all (its bounds count like the rest).
        assert got.pop("age_seconds") == (None if age is None else pytest.approx(age + 90))
        assert got == record


def test_json_survives_names_that_are_not_utf8() -> None:
    odd = generic("/srv/run/caf\udce9.lock", {"pid": DEAD, "user": "x"})
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, full=True, upserts=entries([odd])))
    doc = document(capture(board, NOW, LOCAL_HOST))
    assert doc["locks"][0]["name"] == "caf\\xe9"
    assert doc["events"][0]["name"] == "caf\\xe9"
    assert doc["events"][0]["lock_id"] == "file:/srv/run/caf\\xe9.lock"
    assert "`caf\\xe9`" in to_markdown(capture(board, NOW, LOCAL_HOST))


def test_json_of_an_empty_board() -> None:
    doc = document(capture(Board(LOCAL_HOST), NOW, LOCAL_HOST))
    assert doc["locks"] == doc["events"] == doc["blocking"] == doc["conflicts"] == []
    assert doc["summary"]["locks"] == 0


# -- Markdown --------------------------------------------------------------------------


class Tables(HTMLParser):
    """Every table of an HTML page as rows of cell texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def render(markdown: str) -> str:
    html_text: str = markdown_it.MarkdownIt("gfm-like").render(markdown)
    return html_text


def tables(markdown: str) -> list[list[list[str]]]:
    parser = Tables()
    parser.feed(render(markdown))
    return parser.tables


def cells_per_row(markdown: str) -> set[int]:
    """Cells per table line as a GFM parser splits them: at pipes not escaped."""
    counts = set()
    for line in markdown.splitlines():
        if line.startswith("|"):
            pipes = [m for m in re.findall(r"\\.|\|", line) if m == "|"]
            counts.add(len(pipes) - 1)
    return counts


def shown_text(value: str) -> str:
    """What a reader sees of a hostile string: invisible characters spelled out."""
    return "".join(
        f"\\x{ord(c):02x}"
        if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0
        else f"\\u{ord(c):04x}"
        if c in "\u202e"
        else c
        for c in value
    )


def test_markdown_report_sections() -> None:
    report = to_markdown(capture(busy_board(), NOW, LOCAL_HOST, filter_text="state:stale"))
    lines = report.splitlines()
    assert lines[0] == f"# lockwatch incident: 2026-11-21 12:00:00 UTC on {LOCAL_HOST}"
    assert lines[2] == (
        "**11 locks**: 2 stale, 1 invalid, 2 waiting, 6 active · 2 waiting sessions"
        " · 1 scope conflict · 1 unreadable place"
    )
    assert "Dashboard filter at the time: state:stale" in report
    headings = [line for line in lines if line.startswith("#")]
    assert headings[1:] == [
        "## Needs attention",
        "## Blocking",
        f"### {escape(SERVER)}",
        "## Scope conflicts",
        "## Sources",
        f"## Last {len(capture(busy_board(), NOW, LOCAL_HOST).events)} events (oldest first)",
    ]
    assert report.endswith("\n") and not report.endswith("\n\n")


def test_needs_attention_lists_stale_invalid_waiting_then_remarkable_active_ones() -> None:
    report = to_markdown(capture(busy_board(), NOW, LOCAL_HOST))
    (attention, _events) = tables(report)
    header, *rows = attention
    assert header == ["state", "source", "name", "holder", "age", "reasons"]
    # Worst first, then the oldest; pg advisory key (1, 42) unnamed is `1:42`.
    assert [(r[0], r[2], r[3]) for r in rows] == [
        ("stale", "docs-sweep", "200 (dead)"),
        ("stale", "old-deploy", f"{LIVE}@{LOCAL_HOST} deployer"),
        ("invalid", "broken", "—"),
        ("waiting", "1:42", "worker (pid 4243, batch)"),  # waiting for 12 s
        ("waiting", "1:42", "worker (pid 4244, batch)"),  # for 5 s
        ("active", "late-deploy", f"{LIVE}@{LOCAL_HOST} deployer"),  # heartbeat late
        ("active", "fix-bugs", "100"),  # scope conflicts
        ("active", "refactor", "100"),
        ("active", "1:42", "worker (pid 4242, app)"),  # blocks the waiters
    ]
    by_name = {r[2]: r for r in rows}
    assert by_name["docs-sweep"][1:] == [
        "little-loops", "docs-sweep", "200 (dead)", "2h30m", "holder_dead",
    ]  # fmt: skip
    assert by_name["old-deploy"][3:] == [f"{LIVE}@{LOCAL_HOST} deployer", "50m00s",
                                         "heartbeat_expired"]  # fmt: skip
    assert by_name["broken"][5] == "unparseable"
    assert (rows[3][1], rows[3][4], rows[3][5]) == (SERVER, "12s", "waiting")
    # No grant time for a Postgres lock: held at least since its session went idle.
    assert (rows[8][1], rows[8][4], rows[8][5]) == (SERVER, "≥ 30s", "blocking")
    assert by_name["fix-bugs"][5] == "scope_conflict"
    assert by_name["late-deploy"][5] == "heartbeat_late"
    assert "deploy-app" not in by_name and "quiet" not in by_name  # nothing to say


def test_blocking_tree_as_nested_bullets() -> None:
    report = to_markdown(capture(busy_board(), NOW, LOCAL_HOST))
    start = report.index("## Blocking")
    section = report[start : report.index("## Scope conflicts")].splitlines()
    assert section[4:7] == [
        "- pid 4242 (worker, app, idle in transaction) blocks 2 directly, 2 in total",
        "  - pid 4243 (worker, batch, active) blocks 1 directly, 1 in total",
        "  - pid 4244 (worker, batch, active)",  # shown once, under the first who blocks it
    ]


def test_scope_conflicts_and_sources() -> None:
    report = to_markdown(capture(busy_board(), NOW, LOCAL_HOST))
    assert "- fix-bugs overlaps refactor\n\n" in report  # the pair once, not both ways
    assert "refactor overlaps fix-bugs" not in report
    assert "- file /srv: **watching**, data from 2026-11-21 12:00:00 UTC\n" in report
    assert f"- postgres {escape(SERVER)}: **connected**, data from 2026-11-21 11:59:59 UTC" in (
        report
    )
    assert "- /srv/private: unreadable, permission denied\n" in report


def test_events_table() -> None:
    board = busy_board()
    later = NOW + timedelta(minutes=3, seconds=7)
    board.apply(ChangeSet("files", later, upserts=entries([tower("new-one", at=later)], later)))
    (_, events) = tables(to_markdown(capture(board, later, LOCAL_HOST)))
    header, *rows = events
    assert header == ["time (UTC)", "event", "lock", "detail"]
    assert rows[-1] == [
        "2026-11-21 12:03:07", "appeared", "new-one", f"active; {LIVE}@{LOCAL_HOST} deployer",
    ]  # fmt: skip
    assert rows[0][0] == "2026-11-21 12:00:00"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_cannot_break_tables_or_inject_markup(name: str) -> None:
    victim = loop(name, pid=DEAD, started_ago=99_999.0)  # stale: first in the table
    also = generic("/srv/run/h.lock", {"pid": DEAD, "actor": name, "host": LOCAL_HOST})
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, full=True, upserts=entries([victim, also])))
    report = to_markdown(capture(board, NOW, LOCAL_HOST))
    assert cells_per_row(report) == {6, 4}
    page = render(report)
    # Code spans are how such text is kept inert: every other tag is the name's doing.
    for tag in ("<a ", "<img", "<script", "<em>", "<del>", "<s>", "<b>", "<br"):
        assert tag not in page, (tag, page)
    assert page.count("<strong>") == 1  # the summary's own
    attention, events = tables(report)
    assert attention[1][2] == shown_text(name)  # the whole name, in its own cell
    assert attention[2][3] == f"{DEAD}@{LOCAL_HOST} {shown_text(name)} (dead)"
    assert shown_text(name) in [row[2] for row in events[1:]]
    assert "\u202e" not in report


def test_hostile_server_status_and_error_text_is_escaped() -> None:
    incident = Incident(
        at=NOW,
        host="evil<b>host</b>",
        entries=(),
        statuses=(SourceStatus("file", "/srv/[x](http://evil)", "error", reason="<img src=x>"),),
        errors=(ScanError("/srv/*a*\n# heading", "`boom` | x"),),
        trees=(),
        conflicts=(),
        events=(),
        filter_text="<script>",
    )
    page = render(to_markdown(incident))
    for tag in ("<a ", "<img", "<script", "<em>", "<b>", "<h2>heading"):
        assert tag not in page, tag
    assert "evil&lt;b&gt;host&lt;/b&gt;" in page
    assert "/srv/[x](http://evil)" in page
    assert "/srv/*a*\\x0a# heading" in page


@given(
    st.text(
        alphabet=st.characters(
            max_codepoint=0x2FFF, exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
        ),
        max_size=40,
    )
)
def test_escaped_text_renders_as_itself(value: str) -> None:
    rendered = markdown_it.MarkdownIt("gfm-like").renderInline(escape(value))
    inner = rendered.removeprefix("<code>").removesuffix("</code>")
    assert "<" not in inner
    assert html.unescape(inner) == value


@pytest.mark.parametrize(
    ("value", "pasted"),
    [
        ("deploy@tower-01", "deploy@tower-01"),
        ("2026-11-21 12:00", "2026-11-21 12:00"),
        ("state:stale", "state:stale"),
        ("pid 4242 (app, idle in transaction)", "pid 4242 (app, idle in transaction)"),
        ("/srv/app/deploy.lock", "`/srv/app/deploy.lock`"),
        ("a`b", "``a`b``"),
        ("`x`", "`` `x` ``"),
        ("http://evil", "`http://evil`"),
    ],
)
def test_text_pastes_into_chat_without_backslashes(value: str, pasted: str) -> None:
    assert escape(value) == pasted


def test_escape_limits_length_before_escaping() -> None:
    assert escape("a" * 10, limit=5) == "`aaaa…`"
    assert escape("|" * 10, limit=3) == "\\|\\|…"


def test_attention_table_is_capped() -> None:
    dead = [loop(f"dead-{i:03d}", [f"/x/{i}"], pid=DEAD, file=f"d{i}") for i in range(60)]
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, full=True, upserts=entries(dead)))
    report = to_markdown(capture(board, NOW, LOCAL_HOST))
    (attention, _) = tables(report)
    assert len(attention) == 1 + 50
    assert "… and 10 more (all of them are in the JSON)" in report


def test_nothing_needs_attention() -> None:
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, full=True, upserts=entries([tower("deploy-app")])))
    report = to_markdown(capture(board, NOW, LOCAL_HOST))
    assert "Nothing: every lock is active and unremarkable." in report
    assert "## Blocking" not in report and "## Scope conflicts" not in report


def bare(
    events: tuple[Event, ...] = (), trees: tuple[tuple[str, BlockingTree], ...] = ()
) -> Incident:
    return Incident(NOW, LOCAL_HOST, (), (), (), trees, (), events)


def test_events_table_shows_the_last_50() -> None:
    events = tuple(
        Event(NOW + timedelta(seconds=i), EventKind.HEARTBEAT, "file:/x", f"e{i}", "file", "")
        for i in range(80)
    )
    (table,) = tables(to_markdown(bare(events)))
    assert [row[2] for row in table[1:]] == [f"e{i}" for i in range(30, 80)]
    assert "## Last 50 events (oldest first)" in to_markdown(bare(events))
    assert "None recorded." in to_markdown(bare())


def test_wide_tree_is_capped() -> None:
    tree = build({waiter: [1] for waiter in range(2, 302)})
    report = to_markdown(bare(trees=(("db", tree),)))
    bullets = [line for line in report.splitlines() if line.lstrip().startswith("- pid")]
    assert bullets[0] == "- pid 1 blocks 300 directly, 300 in total"
    assert len(bullets) == 100
    assert "- … and 201 more sessions (all in the JSON)" in report


def test_deep_tree_is_cut_at_its_depth_limit() -> None:
    tree = build({i + 1: [i] for i in range(1, 40)})
    report = to_markdown(bare(trees=(("db", tree),)))
    bullets = [line for line in report.splitlines() if line.lstrip().startswith("- pid")]
    assert len(bullets) == 12
    assert bullets[-1] == " " * 22 + (
        "- pid 12 blocks 1 directly, 28 in total (and 28 more sessions further down)"
    )


def test_cycles_are_listed() -> None:
    tree = build({1: [2], 2: [1], 3: [1]})
    report = to_markdown(bare(trees=(("db", tree),)))
    assert "- **wait-for cycle** (a deadlock in the making): pid 1 → pid 2" in report


def test_prepared_transactions_are_named() -> None:
    tree = build({7: ["prepared:tx1"], 8: ["prepared:?"]})
    report = to_markdown(bare(trees=(("db", tree),)))
    assert "- prepared transaction tx1 blocks 1 directly, 1 in total" in report
    assert "- a prepared transaction blocks 1 directly, 1 in total" in report


def test_timestamps_are_utc_whatever_the_zone() -> None:
    offset = datetime(2026, 11, 21, 13, 0, tzinfo=UTC).astimezone(timezone(timedelta(hours=1)))
    moved = Incident(offset, LOCAL_HOST, (), (), (), (), (), ())
    assert to_markdown(moved).startswith("# lockwatch incident: 2026-11-21 13:00:00 UTC")
    assert document(moved)["generated_at"] == "2026-11-21T13:00:00Z"


def test_verdict_type_is_kept() -> None:
    # Guard for the helpers above: entries carry Verdicts, not records.
    incident = capture(busy_board(), NOW, LOCAL_HOST)
    assert all(isinstance(v, Verdict) and v.state in State for _, v in incident.entries)
