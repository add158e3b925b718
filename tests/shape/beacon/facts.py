"""A beacon lease as lockwatch sees it: pure facts and their rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.facts import Facts, Section
from lockwatch.model.lock import Reason
from lockwatch.model.verdict import State, Verdict

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup


@dataclass(frozen=True, slots=True)
class BeaconLease(Facts):
    server: str  # host:port, as its lock id carries it
    key: str
    owner: str
    fence: int  # the server's count of takings: a break names the one it saw
    # When the lease lapses (the server's word): an instant, not a countdown, so
    # that a lease seen again at the next poll is the same lease.
    lapses_at: datetime

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        # Beacon's own rule: a lease past its end is stale (its owner stopped
        # renewing), and only then; the fence says who held it last.
        if now >= self.lapses_at:
            late = (now - self.lapses_at).total_seconds()
            reason = Reason("beacon_lapsed", f"lease of {self.owner} lapsed {late:.0f}s ago")
            return Verdict(State.STALE, (reason,))
        return Verdict(State.ACTIVE, (), next_change_at=self.lapses_at)

    def extend_record(self, record: dict[str, Any]) -> None:
        record.update(server=self.server, key=self.key, fence=self.fence, owner=self.owner)

    def holder_text(self, lock: Lock) -> str | None:
        return f"{self.owner} (fence {self.fence})"

    def where(self, lock: Lock) -> str | None:
        return f"beacon {self.server} {self.key}"

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:
        left = (self.lapses_at - now).total_seconds()
        return (
            Section(
                "Beacon lease",
                (
                    ("server", self.server),
                    ("key", self.key),
                    ("owner", self.owner),
                    ("fence", str(self.fence)),
                    ("lease", f"{left:.0f}s left" if left > 0 else "lapsed"),
                ),
            ),
        )

    def matches_text(self, needle: str) -> bool:
        return needle in self.owner.lower()
