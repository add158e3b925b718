"""An incident snapshot: everything the dashboard knew at one instant, as JSON and Markdown.

`capture` runs on the UI thread when the operator presses `e`: it only copies
references into tuples (locks, verdicts and events are immutable), so the board
can move on at once. Rendering (`to_json`, `to_markdown`) may then happen
anywhere, off the UI thread.

The JSON carries each lock exactly as `lockwatch ls --json` would (the
`lockwatch.ls/1` lock record). The Markdown is for pasting into an incident
channel: every piece of text that comes from a lock file or a server (names,
holders, reasons, paths) is escaped, so a hostile lock name can neither break a
table nor smuggle in a link, an image or HTML.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import Any

import orjson

from lockwatch.model.blocking import BlockingTree, BlockNode, NodeId, tree_facts
from lockwatch.model.board import Board
from lockwatch.model.events import Event, holder_text
from lockwatch.model.humanize import counted, duration
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Lock
from lockwatch.model.report import lock_record, text
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.text import terminal_safe
from lockwatch.model.timestamps import seconds_since
from lockwatch.model.verdict import State, Verdict

INCIDENT_SCHEMA = "lockwatch.incident/1"
EVENTS_CAPTURED = 500
# What the Markdown report shows at most: the JSON always has everything.
ATTENTION_ROWS = 50
EVENT_ROWS = 50
ERROR_ROWS = 50
CONFLICT_ROWS = 50
TREE_NODES = 100  # per server
TREE_DEPTH = 12

_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_INDENT_2
_STATES = (State.STALE, State.INVALID, State.UNKNOWN, State.WAITING, State.ACTIVE, State.FREE)
# Active locks worth a look all the same: what they say may explain the incident.
ATTENTION_CODES = frozenset(
    {"blocking", "scope_conflict", "heartbeat_late", "clock_skew", "prepared_transaction"}
)
_RANK = {state: rank for rank, state in enumerate(_STATES)}


@dataclass(frozen=True, slots=True)
class Incident:
    """What the board showed at `at`: references only, nothing rendered yet."""

    at: datetime
    host: str
    entries: tuple[tuple[Lock, Verdict], ...]  # verdicts as shown (scope conflicts included)
    statuses: tuple[SourceStatus, ...]
    errors: tuple[ScanError, ...]
    trees: tuple[tuple[str, BlockingTree], ...]  # (server, tree), by server
    conflicts: tuple[tuple[str, tuple[str, ...]], ...]  # (lock id, ids it overlaps)
    events: tuple[Event, ...]  # the most recent, oldest first
    filter_text: str = ""  # the dashboard's filter at the time, for the reader's context


def capture(
    board: Board,
    now: datetime,
    host: str,
    *,
    filter_text: str = "",
    events: int = EVENTS_CAPTURED,
) -> Incident:
    """The board as it is now. Cheap: references copied into tuples (every lock,
    whatever the filter: `filter_text` is only recorded)."""
    return Incident(
        at=now,
        host=host,
        entries=board.judged(),
        statuses=tuple(board.all_statuses()),
        errors=tuple(board.all_errors()),
        trees=tuple(sorted(board.blocking_trees().items(), key=lambda item: item[0])),
        conflicts=tuple(board.conflicts()),
        events=_last(board.events, events),
        filter_text=filter_text,
    )


def _last(events: deque[Event], count: int) -> tuple[Event, ...]:
    if count <= 0:
        return ()
    skip = len(events) - count
    return tuple(events) if skip <= 0 else tuple(islice(events, skip, None))


# -- facts both renderings share -----------------------------------------------------


def _ordered(incident: Incident) -> list[tuple[Lock, Verdict]]:
    """By lock id, as `ls --json` lists them."""
    return sorted(incident.entries, key=lambda pair: pair[0].id)


def _age(lock: Lock, at: datetime) -> float | None:
    """The lock's age at the snapshot. A board keeps a verdict as long as nothing a
    row shows changes, so the age the verdict was judged with may be long past."""
    return seconds_since(lock.acquired_at, at)


def _bound(lock: Lock, at: datetime) -> str:
    """A lock with no known age: the bound its facts know (a Postgres lock keeps no
    grant time), else —."""
    facts = lock.facts
    bound = None if facts is None else facts.age_bound(lock, at)
    return "—" if bound is None else bound


def _state_counts(incident: Incident) -> dict[str, int]:
    counts = dict.fromkeys((state.value for state in State), 0)
    for _, verdict in incident.entries:
        counts[verdict.state.value] += 1
    return counts


def _waiting_sessions(incident: Incident) -> int:
    sessions: set[Hashable] = set()
    for lock, verdict in incident.entries:
        if verdict.state is State.WAITING:
            # One session waits on many locks at once (a Postgres backend): once.
            key = None if lock.facts is None else lock.facts.session_key()
            sessions.add((lock.id, None) if key is None else key)
    return len(sessions)


def _conflict_pairs(incident: Incident) -> int:
    pairs = {
        (min(lock_id, other), max(lock_id, other))
        for lock_id, others in incident.conflicts
        for other in others
    }
    return len(pairs)


def _summary(incident: Incident) -> dict[str, Any]:
    return {
        "locks": len(incident.entries),
        "states": _state_counts(incident),
        "waiting_sessions": _waiting_sessions(incident),
        "scope_conflicts": _conflict_pairs(incident),
        "errors": len(incident.errors),
    }


# -- JSON ------------------------------------------------------------------------------


def to_json(incident: Incident) -> bytes:
    """The `lockwatch.incident/1` document, indented, UTF-8. Each lock is its
    `lockwatch.ls/1` record as of the snapshot (its age counted to `at`)."""
    at = incident.at
    memo: dict[int, dict[str, Any]] = {}
    locks = []
    for lock, verdict in _ordered(incident):
        record = lock_record(lock, verdict, at, memo)
        age = _age(lock, at)
        record["age_seconds"] = None if age is None else round(age, 3)
        locks.append(record)
    names = {lock.id: lock.name for lock, _ in incident.entries}
    document = {
        "schema": INCIDENT_SCHEMA,
        "generated_at": at.astimezone(UTC),
        "host": text(incident.host),
        "filter": text(incident.filter_text),
        "summary": _summary(incident),
        "sources": [{**s.as_json(), "name": text(s.name)} for s in incident.statuses],
        "errors": [
            {"path": text(e.path), "code": e.code, "message": text(e.message)}
            for e in incident.errors
        ],
        "locks": locks,
        "blocking": [{"server": server, **tree.as_json()} for server, tree in incident.trees],
        "conflicts": [
            {
                "id": text(lock_id),
                "name": text(names.get(lock_id, lock_id)),
                "conflicts_with": [text(other) for other in others],
            }
            for lock_id, others in incident.conflicts
        ],
        "events": [_event_json(event) for event in incident.events],
    }
    return orjson.dumps(document, option=_OPTIONS) + b"\n"


def _event_json(event: Event) -> dict[str, object]:
    record = event.as_json()
    record["lock_id"] = None if event.lock_id is None else text(event.lock_id)
    record["name"] = text(event.name)
    record["detail"] = text(event.detail)
    return record


# -- Markdown --------------------------------------------------------------------------

# A lock's text (names, holders, reasons, paths) must not format, link, embed or
# start a heading in the report, and should paste into chat as it reads. Text of
# letters, digits and plain punctuation is written as it is (`user@host`,
# `12:00`: no dot, so no autolink or fuzzy link can form; no `://`); anything
# else goes in a code span, shown as itself, whose fence is one backtick longer
# than any run inside it.
_PLAIN = lazy_compile(r"[A-Za-z0-9 \-/:@,;()=+%]*")
_TICKS = lazy_compile(r"`+")
# A table splits at pipes even inside code spans, and a backslash before one
# cannot be kept there: text with a pipe is escaped character by character
# instead (CommonMark lets any ASCII punctuation be escaped; with `[` `]`
# escaped no link forms, and `:`, `@` and a dot before a letter stop autolinks).
_SPECIAL = lazy_compile(
    r"[\\`*~\[\]<>&|$:@#]"
    r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"
    r"|\.(?=[A-Za-z0-9])"
)


def escape(value: str, limit: int | None = None) -> str:
    """`value` as inert Markdown, shortened to `limit` characters first."""
    if limit is not None and len(value) > limit:
        value = value[: limit - 1] + "…"
    # Line breaks, other controls, bidi overrides and invisible characters are
    # spelled out as the terminal shows them (`\x0a`, `\u202e`), so they can
    # neither end a line nor reorder what the reader sees.
    text = terminal_safe(value)
    if _PLAIN.fullmatch(text) and "://" not in text and not text.startswith(("-", "+")):
        return text
    if "|" in text:
        return _SPECIAL.sub(r"\\\g<0>", text)
    fence = "`" * (max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    # A span that starts or ends with a backtick or a space is padded: CommonMark
    # strips exactly one space from each side of such a span.
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def to_markdown(incident: Incident) -> str:
    """A paste-ready report: summary, what needs attention, blocking trees, scope
    conflicts, sources and the last events."""
    lines: list[str] = [
        f"# lockwatch incident: {_when(incident.at)} on {escape(incident.host, 120)}",
        "",
        _summary_line(incident),
    ]
    if incident.filter_text:
        lines.append("")
        lines.append(f"Dashboard filter at the time: {escape(incident.filter_text, 200)}")
    lines.append("")
    lines.extend(_attention(incident))
    lines.extend(_trees(incident))
    lines.extend(_conflicts(incident))
    lines.extend(_sources(incident))
    lines.extend(_events(incident))
    return "\n".join(lines).rstrip("\n") + "\n"


def _summary_line(incident: Incident) -> str:
    counts = _state_counts(incident)
    states = ", ".join(
        f"{counts[state.value]} {state.value}"
        for state in _STATES
        if state not in (State.FREE, State.UNKNOWN) or counts[state.value]
    )
    parts = [
        f"**{counted(len(incident.entries), 'lock')}**: {states}",
        counted(_waiting_sessions(incident), "waiting session"),
        counted(_conflict_pairs(incident), "scope conflict"),
    ]
    if incident.errors:
        parts.append(counted(len(incident.errors), "unreadable place"))
    return " · ".join(parts)


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cell or " " for cell in cells) + " |"


def _needs_attention(lock: Lock, verdict: Verdict) -> bool:
    if verdict.state is not State.ACTIVE:
        return True
    return any(code in ATTENTION_CODES for code in verdict.codes)


def _source(lock: Lock) -> str:
    """Where the lock is from: its server where its facts name one, else its format."""
    place = None if lock.facts is None else lock.facts.place(lock)
    return lock.format if place is None else place


def _holder(lock: Lock, verdict: Verdict) -> str:
    who = holder_text(lock) or "—"
    return f"{who} (dead)" if verdict.alive is False and lock.holder.pid is not None else who


def _attention(incident: Incident) -> list[str]:
    at = incident.at
    chosen = [pair for pair in incident.entries if _needs_attention(*pair)]
    if not chosen:
        return ["## Needs attention", "", "Nothing: every lock is active and unremarkable.", ""]

    def order(pair: tuple[Lock, Verdict]) -> tuple[Any, ...]:
        lock, verdict = pair
        since = lock.acquired_at.timestamp() if lock.acquired_at is not None else float("inf")
        return (_RANK[verdict.state], since, lock.name.lower(), lock.id)

    chosen.sort(key=order)
    lines = [
        "## Needs attention",
        "",
        _row(("state", "source", "name", "holder", "age", "reasons")),
        _row(("---",) * 6),
    ]
    for lock, verdict in chosen[:ATTENTION_ROWS]:
        age = _age(lock, at)
        lines.append(
            _row(
                (
                    verdict.state.value,
                    escape(_source(lock), 60),
                    escape(lock.name, 80),
                    escape(_holder(lock, verdict), 80),
                    duration(age) if age is not None else _bound(lock, at),
                    escape(", ".join(verdict.codes), 120),
                )
            )
        )
    if len(chosen) > ATTENTION_ROWS:
        lines.append("")
        lines.append(f"… and {len(chosen) - ATTENTION_ROWS} more (all of them are in the JSON)")
    lines.append("")
    return lines


def _node_label(node: NodeId, sessions: dict[Hashable, str]) -> str:
    """How a tree names `node`: as its facts label their session, else plainly."""
    label = sessions.get(node)
    if label is not None:
        return label
    if isinstance(node, int):
        return f"pid {node}"
    # A PostgreSQL waiter names the prepared transaction it waits on
    # (model/blocking.py), which no lock of its own labels; any other node the
    # facts did not label (a store's token, lease or client) is shown as it is.
    if node.startswith("prepared:"):
        gid = node.removeprefix("prepared:")
        return "a prepared transaction" if gid == "?" else f"prepared transaction {gid}"
    return node


def _node_line(node: BlockNode, sessions: dict[Hashable, str]) -> str:
    label = escape(_node_label(node.id, sessions), 120)
    if not node.direct:
        return label
    return f"{label} blocks {node.direct} directly, {node.total} in total"


def _trees(incident: Incident) -> list[str]:
    trees = [(server, tree) for server, tree in incident.trees if tree.roots or tree.cycles]
    if not trees:
        return []
    sessions_by_server: dict[str, dict[Hashable, str]] = {}
    for lock, _ in incident.entries:
        facts = tree_facts(lock)
        if facts is None:
            continue
        found = facts.tree_node()
        server = facts.group()
        if found is not None and server is not None:
            node, label = found
            sessions_by_server.setdefault(server, {})[node] = label
    lines = ["## Blocking", ""]
    for server, tree in trees:
        sessions = sessions_by_server.get(server, {})
        lines.append(f"### {escape(server, 120)}")
        lines.append("")
        shown = 0
        hidden = 0
        stack: list[tuple[BlockNode, int]] = [(root, 0) for root in reversed(tree.roots)]
        while stack:
            node, depth = stack.pop()
            if shown >= TREE_NODES:
                hidden += 1 + _below(node)
                continue
            line = _node_line(node, sessions)
            if node.waiters and depth + 1 >= TREE_DEPTH:
                line += f" (and {counted(_below(node), 'more session')} further down)"
            else:
                stack.extend((waiter, depth + 1) for waiter in reversed(node.waiters))
            lines.append(f"{'  ' * depth}- {line}")
            shown += 1
        if hidden:
            lines.append(f"- … and {counted(hidden, 'more session')} (all in the JSON)")
        for cycle in tree.cycles:
            members = " → ".join(escape(_node_label(node, sessions), 60) for node in cycle)
            lines.append(f"- **wait-for cycle** (a deadlock in the making): {members}")
        lines.append("")
    return lines


def _below(node: BlockNode) -> int:
    """Nodes shown under `node` in the tree (each session appears once)."""
    count = 0
    stack = list(node.waiters)
    while stack:
        count += 1
        stack.extend(stack.pop().waiters)
    return count


def _conflicts(incident: Incident) -> list[str]:
    if not incident.conflicts:
        return []
    names = {lock.id: lock.name for lock, _ in incident.entries}
    lines = ["## Scope conflicts", ""]
    # Each lock lists only the partners no earlier line named it with: a pair is said once.
    said: set[frozenset[str]] = set()
    rows: list[str] = []
    for lock_id, others in incident.conflicts:
        fresh = [other for other in others if frozenset((lock_id, other)) not in said]
        said.update(frozenset((lock_id, other)) for other in fresh)
        if fresh:
            overlapped = ", ".join(escape(names.get(other, other), 80) for other in fresh)
            rows.append(f"- {escape(names.get(lock_id, lock_id), 80)} overlaps {overlapped}")
    lines.extend(rows[:CONFLICT_ROWS])
    if len(rows) > CONFLICT_ROWS:
        lines.append(f"- … and {len(rows) - CONFLICT_ROWS} more")
    lines.append("")
    return lines


def _sources(incident: Incident) -> list[str]:
    if not (incident.statuses or incident.errors):
        return []
    lines = ["## Sources", ""]
    for status in incident.statuses:
        line = f"- {status.kind} {escape(status.name, 120)}: **{status.state}**"
        if status.reason:
            line += f" ({escape(status.reason, 200)})"
        if status.updated_at is not None:
            line += f", data from {_when(status.updated_at)}"
        if status.next_retry_at is not None:
            line += f", next try {_when(status.next_retry_at)}"
        lines.append(line)
    if incident.errors:
        if incident.statuses:
            lines.append("")
        lines.append(f"Could not read {counted(len(incident.errors), 'place')}:")
        lines.append("")
        for error in incident.errors[:ERROR_ROWS]:
            lines.append(
                f"- {escape(error.path, 160)}: {escape(error.code, 40)},"
                f" {escape(error.message, 200)}"
            )
        if len(incident.errors) > ERROR_ROWS:
            lines.append(f"- … and {len(incident.errors) - ERROR_ROWS} more")
    lines.append("")
    return lines


def _events(incident: Incident) -> list[str]:
    events = incident.events[-EVENT_ROWS:]
    if not events:
        return ["## Recent events", "", "None recorded.", ""]
    lines = [
        f"## Last {counted(len(events), 'event')} (oldest first)",
        "",
        _row(("time (UTC)", "event", "lock", "detail")),
        _row(("---",) * 4),
    ]
    for event in events:
        lines.append(
            _row(
                (
                    event.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
                    str(event.kind),
                    escape(event.name, 80),
                    escape(event.detail, 160),
                )
            )
        )
    lines.append("")
    return lines
