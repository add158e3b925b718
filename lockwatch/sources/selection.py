"""What a selected store source (Redis, etcd, MySQL) has in common, apart from
its polling (sources/polled.py): every source's plugin defines its selection at
import, and `ls` imports every plugin for its options, so this stays light and
loads the polling machinery only when a selected source collects or feeds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from lockwatch.sources.contract import DEFAULT_DEADLINE, Collected, ListingRequest

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.model.changes import Entry
    from lockwatch.sources.polled import PolledFeed, ServerPoller


class StoreSelection:
    """What a selected store source (Redis, etcd) has in common: its pollers,
    each polled once for `ls` and every `refresh` seconds for the dashboard.
    A subclass names its `kind` and builds `pollers`."""

    kind: ClassVar[str]
    refresh: float
    # A poll's deadline (seconds); a selection may name its own.
    deadline: ClassVar[float] = DEFAULT_DEADLINE

    def pollers(self, clock: Clock) -> Sequence[ServerPoller]:
        raise NotImplementedError

    def collect(self, request: ListingRequest) -> Collected:
        from lockwatch.clock import SystemClock
        from lockwatch.sources.polled import collect_polled

        return collect_polled(self.pollers(SystemClock()), request, self.kind, self.deadline)

    def settler(self) -> Callable[[Entry, Entry], bool]:
        """Whether a lock seen again has nothing new to show (its feeds' `settle`):
        by default, when only its countdowns moved."""
        from lockwatch.sources.polled import same_but_for_countdown

        return same_but_for_countdown

    def feeds(self, clock: Clock, host: str) -> Sequence[PolledFeed]:
        from lockwatch.sources.polled import PolledFeed

        return [
            PolledFeed(
                poller,
                host=host,
                interval=self.refresh,
                settle=self.settler(),
                deadline=self.deadline,
                clock=clock,
            )
            for poller in self.pollers(clock)
        ]
