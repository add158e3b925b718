"""Where a lock seen through another host's `lockwatch serve` comes from: the
remote source's facts. That host judged it; here it is only shown, never
judged again nor acted on."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from lockwatch.model.facts import Facts, Section
from lockwatch.model.lock import Reason
from lockwatch.model.timestamps import seconds_since
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.stores.facts import WARNING_CODES as STORE_WARNING_CODES

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup

# The kind of source status a remote has (`sources[].kind`), and the registry
# name of the source that reads remotes.
REMOTE_KIND = "remote"

# The fields a merged listing adds to each record of another host.
HOST_FIELD = "host"
REMOTE_FIELD = "remote"
# Added when a serve said it was this host: what it claimed (`host` is then the
# address it was read from).
CLAIMED_FIELD = "claimed_host"


@dataclass(frozen=True, slots=True)
class RemoteOrigin(Facts):
    """A lock another host judged: its pids, files, sessions and clock are that
    host's, so its verdict travels with it and nobody here judges it again."""

    remote: str  # the serve's base URL, as lockwatch names it (no credentials)
    host: str  # the host that serve runs on (its document's `host`, or the lock's own)
    id: str  # the lock's id there: what to act on, on that host
    state: str  # its verdict there: active, stale, invalid, waiting, free, unknown
    reasons: tuple[tuple[str, str], ...] = ()  # (code, message), as that host said them
    alive: bool | None = None
    # Sessions waiting on this lock there (Postgres, kernel): the WAIT column.
    waiters: int = 0
    # Its age when that host wrote its document, and that moment: a lock without
    # an acquisition time still ages. They move with every poll, so they are no
    # reason to redraw a row.
    age_seconds: float | None = field(default=None, compare=False)
    seen_at: datetime | None = field(default=None, compare=False)
    # What its serve said its host was, when that was this host's name: a remote
    # does not speak for this host, so `host` is then the serve's address.
    claimed_host: str | None = None

    foreign: ClassVar[bool] = True

    def waiter_count(self) -> int:
        return self.waiters

    # --- the views ----------------------------------------------------------------

    def remote_host(self) -> str:
        return self.host

    def passed_on(self, record: dict[str, Any]) -> dict[str, Any]:
        """Its checked record for a merged listing: whose it is added."""
        out = {**record, HOST_FIELD: self.host, REMOTE_FIELD: self.remote}
        if self.claimed_host is not None:
            out[CLAIMED_FIELD] = self.claimed_host
            code, message = self.reasons[-1]
            out["reasons"] = [*record.get("reasons", []), {"code": code, "message": message}]
        return out

    def record_at(self, lock: Lock, now: datetime) -> dict[str, Any] | None:
        # As that host wrote it, aged to now, whose it is added.
        record = lock.content
        if not isinstance(record, dict):
            return None
        age = self.age_at(now)
        return {**self.passed_on(record), "age_seconds": None if age is None else round(age, 3)}

    def where(self, lock: Lock) -> str:
        # Another host's: its own path (or name), after its host.
        return f"{self.host}:{lock.path or lock.name}"

    def warning_codes(self) -> frozenset[str]:
        # That host's verdict kept its reasons: a store's warnings stand out here too.
        return STORE_WARNING_CODES

    def sections(self, lock: Lock, now: datetime) -> tuple[Section, ...]:
        if self.claimed_host is not None:
            claimed = (
                ("served by", self.remote),
                ("says it is on", f"{self.claimed_host} (this host's name: not believed)"),
                ("id there", self.id),
            )
            return (Section(f"From the serve at {self.host} (read-only here)", claimed),)
        rows = (
            ("host", self.host),
            ("served by", self.remote),
            ("id there", self.id),
            ("act there", f"lockwatch break {shlex.quote(self.id)} --reason …"),
        )
        return (Section(f"On host {self.host} (read-only here)", rows, whole=("id there",)),)

    def content_title(self) -> str:
        # The record as that host wrote it.
        return "As that host reports it"

    def age_at(self, now: datetime) -> float | None:
        if self.age_seconds is None:
            return None
        if self.seen_at is None:
            return self.age_seconds
        return max(0.0, self.age_seconds + (now - self.seen_at).total_seconds())

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        """The verdict its own host gave, as it gave it; only the age moves on."""
        age = (
            seconds_since(lock.acquired_at, now)
            if lock.acquired_at is not None
            else self.age_at(now)
        )
        return Verdict(
            State(self.state),
            tuple(Reason(code, message) for code, message in self.reasons),
            age_seconds=age,
            alive=self.alive,
        )
