"""PostgreSQL's own word on its lock waits (issue 44, item 7): a wait shorter
than a poll is invisible to sampling, but with `log_lock_waits = on` the server
logs every wait longer than `deadlock_timeout`:

    LOG:  process 4243 still waiting for ShareLock on transaction 731 after 100.1 ms
    DETAIL:  Process holding the lock: 4242. Wait queue: 4243.
    LOG:  process 4243 acquired ShareLock on transaction 731 after 2112.4 ms
    ERROR:  canceling statement due to lock timeout
    ERROR:  deadlock detected

This folds those lines into wait spans (`origin` log): the waiter, each holder
the DETAIL names, from the first "still waiting" (its time less the wait so
far) to "acquired" (outcome acquired), a lock timeout (timeout), a cancel
(cancelled) or a deadlock (deadlock); a wait the log never ends ends at its last
line, outcome unknown. The stderr format with the default `log_line_prefix`
(`%m [%p] `) and any prefix holding `%m`/`%t` and `[%p]` is read; other lines
are skipped. Lines are bounded (`MAX_LINE`), the file is read as the audit log
is (bounded, never followed through a symlink)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lockwatch.model.history import (
    ACQUIRED,
    CANCELLED,
    DEADLOCK,
    ORIGIN_LOG,
    TIMEOUT,
    WaitSpan,
    Who,
)
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.text import terminal_safe

MAX_LINE = 16 * 1024
MAX_BYTES = 1024 * 1024 * 1024

# `%m [%p] ` (PostgreSQL's default): "2026-12-07 15:40:01.123 UTC [4243] LOG:  …"
_LINE = lazy_compile(
    r"(?P<at>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)"
    r"(?: (?P<zone>[A-Za-z][\w+:-]*|[+-]\d{2}(?::?\d{2})?))?"
    r".*?\[(?P<pid>\d+)\][^A-Z]*(?P<level>LOG|DETAIL|ERROR|STATEMENT|CONTEXT|HINT|FATAL):\s+"
    r"(?P<text>.*)"
)
_WAITING = lazy_compile(
    r"process (\d+) (?:still waiting|detected deadlock while waiting)"
    r" for (\w+) on (.+?) after ([\d.]+) ms"
)
_ACQUIRED = lazy_compile(r"process (\d+) acquired (\w+) on (.+?) after ([\d.]+) ms")
_HOLDING = lazy_compile(r"Process(?:es)? holding the lock: ([\d, ]+)\.")
# A deadlock's DETAIL, one line per process in the cycle.
_BLOCKED = lazy_compile(r"Process (\d+) waits for \w+ on .+?; blocked by process (\d+)\.")
_ENDS = {
    "canceling statement due to lock timeout": TIMEOUT,
    "canceling statement due to statement timeout": TIMEOUT,
    "canceling statement due to user request": CANCELLED,
    "deadlock detected": DEADLOCK,
}


@dataclass(frozen=True, slots=True)
class LogLine:
    at: datetime
    pid: int
    level: str
    text: str


@dataclass(slots=True)
class _Wait:
    waiter: int
    mode: str
    resource: str
    start: datetime
    holders: list[int] = field(default_factory=list)


def parse_line(raw: str) -> LogLine | None:
    """One stderr log line, or None when it is not one (a continuation, csv)."""
    found = _LINE.match(raw[:MAX_LINE])
    if found is None:
        return None
    zone = found["zone"]
    try:
        at = datetime.fromisoformat(found["at"])
    except ValueError:
        return None
    # The server logs in its log_timezone; UTC (PostgreSQL's default in
    # containers) and a numeric offset are read, any other name as UTC.
    if zone and zone[0] in "+-":
        try:
            at = datetime.fromisoformat(found["at"] + zone)
        except ValueError:
            at = at.replace(tzinfo=UTC)
    else:
        at = at.replace(tzinfo=UTC)
    return LogLine(at.astimezone(UTC), int(found["pid"]), found["level"], found["text"])


def read_lines(path: Path) -> Iterator[str]:
    """The file's lines, each cut at MAX_LINE, at most MAX_BYTES in all; a
    symlink is refused (OSError), as every file lockwatch trusts is."""
    from lockwatch.sources.logtail import read_lines as read

    return read(path, max_line=MAX_LINE, max_bytes=MAX_BYTES)


def fold(lines: Iterable[str], *, host: str, server: str) -> list[WaitSpan]:
    """The wait spans PostgreSQL's log says, oldest first (see the module)."""
    folding = Folding(host, server)
    for raw in lines:
        folding.feed(raw)
    return folding.done()


class Folding:
    """The fold's state: the waits open by waiter pid; the wait a DETAIL line
    (and its tab-indented continuation lines) belongs to; a wait whose end was
    logged, kept open until its DETAIL is read (a deadlock's names the blocker).
    Fed a line at a time (`contract.LogFolding`): `take` hands over the waits
    ended so far, for a log followed as it grows (`--pg-log` on serve)."""

    def __init__(self, host: str, server: str) -> None:
        self.host, self.server = host, server
        self.waits: dict[int, _Wait] = {}
        self.spans: list[WaitSpan] = []
        self.detail_of: _Wait | None = None
        self.in_detail = False
        self.ending: tuple[_Wait, datetime, str] | None = None
        self.latest: datetime | None = None

    def feed(self, raw: str) -> None:
        if raw.startswith("\t"):
            if self.in_detail and self.detail_of is not None:
                _holders(self.detail_of, raw)
            return
        line = parse_line(raw)
        if line is None:
            return
        self.latest = line.at
        wait = self.detail_of
        if line.level == "DETAIL" and wait is not None and wait.waiter == line.pid:
            self.in_detail = True
            _holders(wait, line.text)
            return
        self._end()
        self.detail_of, self.in_detail = None, False
        if line.level == "LOG":
            self.detail_of = _log(line, self.waits, self.spans, self.host, self.server)
        elif line.level == "ERROR" and line.text in _ENDS:
            ended = self.waits.pop(line.pid, None)
            if ended is not None:
                self.ending = (ended, line.at, _ENDS[line.text])
                self.detail_of = ended

    def _end(self) -> None:
        if self.ending is not None:
            wait, at, outcome = self.ending
            self.spans += _spans(wait, self.host, self.server, at, outcome)
            self.ending = None

    def take(self) -> list[WaitSpan]:
        if self.ending is not None and self.ending[2] != DEADLOCK:
            self._end()  # only a deadlock's DETAIL, still to come, says more
        ended, self.spans = self.spans, []
        return ended

    def done(self) -> list[WaitSpan]:
        self._end()
        for wait in self.waits.values():
            self.spans += _spans(wait, self.host, self.server, self.latest, None)
        self.spans.sort(key=lambda span: (span.start, span.waiter.node, span.blocker.node))
        return self.spans


def _log(
    line: LogLine, waits: dict[int, _Wait], spans: list[WaitSpan], host: str, server: str
) -> _Wait | None:
    waiting = _WAITING.match(line.text)
    if waiting is not None:
        pid = int(waiting[1])
        wait = waits.get(pid)
        if wait is None or (wait.mode, wait.resource) != (waiting[2], waiting[3]):
            start = line.at - timedelta(milliseconds=float(waiting[4]))
            wait = waits[pid] = _Wait(pid, waiting[2], terminal_safe(waiting[3]), start)
        return wait
    acquired = _ACQUIRED.match(line.text)
    if acquired is not None:
        wait = waits.pop(int(acquired[1]), None)
        if wait is not None:
            end = wait.start + timedelta(milliseconds=float(acquired[4]))
            spans += _spans(wait, host, server, max(end, wait.start), ACQUIRED)
    return None


def _holders(wait: _Wait, text: str) -> None:
    """The holders a DETAIL line names for `wait`: "Process holding the lock"
    of a wait, or the waiter's own "blocked by process" of a deadlock."""
    pids: list[int] = []
    holding = _HOLDING.search(text)
    if holding is not None:
        pids = [int(word) for word in holding[1].replace(",", " ").split()]
    for blocked in _BLOCKED.finditer(text):
        if int(blocked[1]) == wait.waiter:
            pids.append(int(blocked[2]))
    for pid in pids:
        if pid and pid != wait.waiter and pid not in wait.holders:
            wait.holders.append(pid)


def _spans(
    wait: _Wait, host: str, server: str, end: datetime | None, outcome: str | None
) -> list[WaitSpan]:
    waiter = Who(str(wait.waiter), pid=wait.waiter)
    return [
        WaitSpan(
            host,
            "postgres",
            server,
            wait.resource,
            wait.mode,
            waiter,
            Who(str(holder), pid=holder),
            wait.start,
            end,
            outcome,
            origin=ORIGIN_LOG,
            cycle=outcome == DEADLOCK,
        )
        for holder in wait.holders
    ]
