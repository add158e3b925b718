"""The lock history's reader and writer API: what the CLI, the dashboard and
`serve` code against (issue 44). Everything here is generic: any source's locks,
through the Lock/board model and the lock's facts.

Open a store with `open_history(target)`:

- `None`: the default SQLite file in the user state directory (platformdirs),
  `history.sqlite3` beside the audit log;
- a path: that SQLite file (WAL; made 0600 when new; refused when others can
  write it, as the audit log is);
- `postgresql://…` (or `postgres://…`): the same schema in a PostgreSQL
  database, one row set per host (item 6).

Every time handed in or out is an aware datetime (UTC when it comes out).
Intervals are half open: a span covers `start <= t < end`; `end` None means it
lasts as far as the store knows. A recorder killed mid-run leaves open spans:
readers end them at that recorder's last heartbeat (see `HistoryStore`).

Errors: `HistoryError` (one clear line: a corrupt file, a newer schema, a file
others can write, a server that refused) from `open_history` and any reader
call. A store never raises anything else for bad data in the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from lockwatch.history.base import SCHEMA_VERSION, Batch, HistoryError
from lockwatch.model.board import Applied, Board
from lockwatch.model.changes import Entry
from lockwatch.model.history import ActionMark, Episode, LockSpan, Outage, WaitSpan
from lockwatch.model.lock import Lock

__all__ = [
    "SCHEMA_VERSION",
    "Batch",
    "HistoryError",
    "HistoryObserver",
    "HistoryStore",
    "default_path",
    "is_dsn",
    "open_history",
]


class HistoryStore(Protocol):
    """A history store (SQLite file or PostgreSQL database). Readers see every
    host that writes into it unless `host` narrows them (the store's own
    `host` attribute, given to `open_history`, is the one it writes as).

    Thread safety: one store object belongs to one thread; the recorder's writer
    thread opens its own (`open_history` again with the same target)."""

    # What the store is, for messages: a path, or a DSN without its password.
    name: str
    # The host this store writes as (a recorder's rows carry it).
    host: str

    # --- reading ----------------------------------------------------------------

    def locks_at(self, at: datetime, *, host: str | None = None) -> list[Lock]:
        """Every lock as it was at `at` (its span covering `at`), decoded back
        into real `Lock` objects, in lock id order. Locks of a recorder that was
        not running at `at` are not there: nothing is known of them."""
        ...

    def entries_at(self, at: datetime, *, host: str | None = None) -> list[Entry]:
        """As `locks_at`, with each lock's verdict and process facts as they were
        recorded (what `ls --at` renders)."""
        ...

    def change_times(
        self, since: datetime, until: datetime, *, host: str | None = None
    ) -> list[datetime]:
        """The distinct instants in [since, until] at which any lock span or wait
        span began or ended, oldest first: the steps of the dashboard's step
        back and forth (`locks_at` of consecutive instants differ)."""
        ...

    def episodes(
        self,
        since: datetime | None = None,
        until: datetime | None = None,
        source: str | None = None,
        *,
        host: str | None = None,
    ) -> list[Episode]:
        """Episodes overlapping [since, until] (either None: unbounded), of
        `source` (a registry name) only if given, worst first (waiter-seconds,
        then the longest lasting): wait episodes folded from the wait spans
        (poll and log alike, `Episode.origins` says which) and the trails of
        locks that were stale or invalid with nobody waiting."""
        ...

    def episode(self, episode_id: str) -> Episode | None:
        """One episode by its id (as `episodes` gave it), or None."""
        ...

    def waits(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[WaitSpan]:
        """The wait spans overlapping [since, until], oldest first: an episode's
        timeline, and what `model/episodes.py` folds."""
        ...

    def lock_spans(
        self,
        since: datetime | None,
        until: datetime | None,
        *,
        lock_id: str | None = None,
        host: str | None = None,
        states: Iterable[str] | None = None,
    ) -> list[LockSpan]:
        """The lock spans overlapping [since, until] (of `lock_id` only, in
        `states` only, if given), oldest first."""
        ...

    def actions(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[ActionMark]:
        """The actions recorded in [since, until], oldest first."""
        ...

    def outages(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[Outage]:
        """The source outages overlapping [since, until], oldest first."""
        ...

    def hosts(self) -> list[str]:
        """Every host that has written into this store."""
        ...

    # --- writing ----------------------------------------------------------------

    def record(self, batch: Batch, *, poll_seconds: float) -> None:
        """Apply one batch in one transaction, as this store's host (its
        recorder session started on the first call). `poll_seconds`: the
        recorder's poll interval (episodes are not split by gaps shorter than
        two of them). Raises `HistoryError` (disk full, read-only, gone)."""
        ...

    def beat(self, at: datetime) -> None:
        """Say this host's recorder is alive at `at` (readers end a dead
        recorder's open spans at its last beat)."""
        ...

    def add_waits(self, spans: Sequence[WaitSpan], *, poll_seconds: float = 0.0) -> int:
        """Add wait spans learnt elsewhere than by polling, each marked with its
        `origin` (for PostgreSQL's log fold: `ORIGIN_LOG`), as closed spans (an
        open one, `end` None, is stored open). A span equal to one already
        stored (same host, server, waiter, blocker, start and origin) is not
        added twice, so folding the same log again is harmless. Returns how
        many were added. They fold into episodes with the polled ones."""
        ...

    def record_action(self, mark: ActionMark) -> None:
        """Record an action (with its audit record's seq): an episode whose root
        blocker's lock it ended says `ended_by: broken` and that audit id."""
        ...

    def prune(self, before: datetime, *, most: int = 5000) -> int:
        """Drop at most `most` spans that ended before `before` (retention):
        called again and again by the recorder, never one long stop. Returns
        how many went."""
        ...

    def close(self) -> None:
        """End this store's recorder session (its open spans stay open: the
        next poll's recorder, or a reader, ends them) and close the store."""
        ...


class HistoryObserver(Protocol):
    """What the dashboard and `serve` hand their board changes to: the
    recorder (history/recorder.py), which writes in its own thread."""

    # Why recording stopped (disk full, ...), one line; None while it goes on.
    failed: str | None

    def observe(self, board: Board, applied: Applied | None, at: datetime) -> None:
        """Right after `board` applied a change set or ticked (`applied`)."""
        ...

    def action(self, mark: ActionMark) -> None:
        """An action done (with its audit record's seq): recorded with the next flush."""
        ...

    def close(self) -> None: ...


def is_dsn(target: str | None) -> bool:
    """Whether `target` names a PostgreSQL database rather than a file."""
    return target is not None and target.startswith(("postgresql://", "postgres://"))


def default_path() -> Path:
    """The default store: `history.sqlite3` in the user state directory."""
    from platformdirs import user_state_dir

    return Path(user_state_dir("lockwatch")) / "history.sqlite3"


def open_history(
    target: str | None,
    *,
    host: str | None = None,
    write: bool = False,
    max_mb: float | None = None,
) -> HistoryStore:
    """Open the history at `target` (None: the default file; a path; a
    `postgresql://` DSN). `host`: the host this process writes as (default: this
    machine's name). `write`: made if missing, migrated to this version if older
    (a reader never creates or changes anything: a missing file is a
    HistoryError saying nothing was recorded there). `max_mb`: the SQLite
    file's size cap (recording stops with a HistoryError past it).

    Raises `HistoryError` with one line: a corrupt file, a newer schema, a file
    or directory others can write, a database that refused."""
    import socket

    me = host or socket.gethostname()
    if is_dsn(target):
        from lockwatch.history.pgstore import PgStore

        assert target is not None
        return PgStore.open(target, host=me, write=write)
    from lockwatch.history.sqlite import SqliteStore

    path = Path(target) if target else default_path()
    return SqliteStore.open(path, host=me, write=write, max_mb=max_mb)
