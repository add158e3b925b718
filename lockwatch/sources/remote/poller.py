"""One remote, polled: its document fetched and read in a worker thread, with
backoff while it cannot be reached. A remote that does not answer keeps its
last locks on screen; its status says since when (`updated_at`) and when the
next try is (`next_retry_at`). The dashboard's feed is the shared PolledFeed."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.status import SourceStatus, backoff_seconds
from lockwatch.model.timestamps import plus_seconds
from lockwatch.sources.polled import Polled
from lockwatch.sources.remote.client import Fetcher, RemoteProblem
from lockwatch.sources.remote.document import DocumentError, RemoteListing, read_document
from lockwatch.sources.remote.endpoints import DEFAULT_TIMEOUT, Remote
from lockwatch.sources.remote.facts import REMOTE_KIND


class Fetch(Protocol):
    def fetch(self) -> bytes: ...

    def close(self) -> None: ...


def fetch_listing(
    fetcher: Fetch, url: str, *, local_host: str, records: bool, locks: bool
) -> RemoteListing:
    """The remote's document, read (raises RemoteProblem)."""
    data = fetcher.fetch()
    try:
        return read_document(data, url, local_host=local_host, records=records, locks=locks)
    except DocumentError as exc:
        raise RemoteProblem("error", f"not a lockwatch serve's answer: {exc}") from None


class RemotePoller:
    def __init__(
        self,
        remote: Remote,
        *,
        host: str,
        clock: Clock | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        fetcher: Fetch | None = None,
        jitter: Callable[[], float] = lambda: random.uniform(-1.0, 1.0),
    ) -> None:
        self.remote = remote
        self.host = host  # this host: a remote that claims its name is not believed
        self.name = f"{REMOTE_KIND}:{remote.url}"
        self.clock = clock or SystemClock()
        self._fetcher: Fetch = fetcher or Fetcher(remote, timeout)
        self._jitter = jitter
        self.failures = 0
        self.last_ok: datetime | None = None

    def poll(self) -> Polled:
        at = self.clock.now()
        url = self.remote.url
        try:
            listing = fetch_listing(
                self._fetcher, url, local_host=self.host, records=False, locks=True
            )
        except RemoteProblem as problem:
            self.failures += 1
            wait = backoff_seconds(self.failures, self._jitter())
            status = SourceStatus(
                REMOTE_KIND,
                url,
                problem.state,
                reason=problem.reason,
                updated_at=self.last_ok,
                next_retry_at=plus_seconds(at, wait),
            )
            return Polled(at, (status,), None, retry_in=wait)
        self.failures = 0
        self.last_ok = at
        status = SourceStatus(
            REMOTE_KIND, url, "connected", reason=listing.summary(), updated_at=at
        )
        return Polled(at, (status,), listing.locks)

    def close(self) -> None:
        self._fetcher.close()
