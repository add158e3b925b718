"""The remote source: other hosts' locks, read from their `lockwatch serve`
(`GET <URL>/v1/locks`, the lockwatch.ls/1 document), each with the host it is
on and that host's own verdict. Read-only: an action on one is refused with
the command to run on its host.

Config table it owns:

    [remote]
    urls = ["https://db1.example:9464", "http://10.0.0.7:9464"]   # or one string
    token_file = "/etc/lockwatch/fleet.token"    # for every remote without its own
    timeout = 10    # seconds for a whole answer (connect, headers, body); past it: stalled

    [remote.token_files]                         # a remote's own token
    "https://db1.example:9464" = "/etc/lockwatch/db1.token"
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockwatch.sources.contract import (
    ActionProvider,
    Collected,
    Found,
    ListingRequest,
    Selected,
    SourceError,
    Wanted,
)
from lockwatch.sources.remote import ids
from lockwatch.sources.remote.declared import RemoteDeclared
from lockwatch.sources.remote.endpoints import (
    DEFAULT_TIMEOUT,
    EndpointError,
    Remote,
    RemoteSettings,
    normalise,
    read_settings,
)
from lockwatch.sources.remote.ids import REMOTE as REMOTE_KIND
from lockwatch.sources.secrets import TokenFileError, read_token

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.feed import Feed
    from lockwatch.sources.remote.document import RemoteListing

DEFAULT_REFRESH = 2.0
# Seconds the feed waits past a fetch's own deadline before it calls it stalled.
FEED_GRACE = 1.0
DEFAULTS = RemoteSettings()


class RemoteSource(RemoteDeclared):
    @property
    def record_types(self) -> tuple[type, ...]:
        # Its facts' types, for recordings: loaded when asked, not at the CLI's start.
        from lockwatch.sources.remote.facts import RemoteOrigin

        return (RemoteOrigin,)

    @property
    def actions(self) -> ActionProvider:
        # Loaded when an action is planned, not when the CLI starts.
        from lockwatch.sources.remote.actions import ACTIONS

        return ACTIONS

    def read_config(self, tables: Mapping[str, Any], where: str) -> RemoteSettings:
        return read_settings(tables, where)

    def select(self, wanted: Wanted) -> Selected | None:
        settings: RemoteSettings = wanted.settings(self.name) or DEFAULTS
        flags = wanted.values.get("remotes") or ()
        try:
            urls = tuple(dict.fromkeys(normalise(url) for url in flags)) or settings.urls
        except EndpointError as exc:
            raise SourceError(f"--remote: {exc}") from None
        if not urls:
            return None
        flag_token = wanted.values.get("remote_token_file")
        remotes = []
        for url in urls:
            path = flag_token or settings.token_files.get(url) or settings.token_file
            try:
                token = read_token(path) if path else None
            except TokenFileError as exc:
                raise SourceError(str(exc)) from None
            remotes.append(Remote(url, token))
        refresh = float(wanted.values.get("refresh") or DEFAULT_REFRESH)
        return SelectedRemotes(tuple(remotes), settings.timeout, refresh)

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return find_remote(target)


@dataclass(frozen=True)
class SelectedRemotes:
    remotes: tuple[Remote, ...]
    timeout: float = DEFAULT_TIMEOUT
    refresh: float = DEFAULT_REFRESH

    def collect(self, request: ListingRequest) -> Collected:
        from concurrent.futures import ThreadPoolExecutor

        from lockwatch.clock import FrozenClock
        from lockwatch.model.assess import assess
        from lockwatch.model.process import StaticProcesses
        from lockwatch.model.status import SourceStatus
        from lockwatch.sources.remote.client import Fetcher, RemoteProblem
        from lockwatch.sources.remote.poller import fetch_listing
        from lockwatch.sources.remote.records import cut, json_array

        def one(remote: Remote) -> RemoteListing | RemoteProblem:
            fetcher = Fetcher(remote, self.timeout)
            try:
                return fetch_listing(
                    fetcher,
                    remote.url,
                    local_host=request.host,
                    records=request.as_json,
                    locks=not request.as_json,
                )
            except RemoteProblem as problem:
                return problem
            finally:
                fetcher.close()

        out = Collected()
        with ThreadPoolExecutor(max_workers=min(8, len(self.remotes))) as pool:
            answers = list(pool.map(one, self.remotes))
        for remote, answer in zip(self.remotes, answers, strict=True):
            if isinstance(answer, RemoteProblem):
                out.statuses.append(
                    SourceStatus(REMOTE_KIND, remote.url, answer.state, reason=answer.reason)
                )
                out.warnings.append(f"remote {remote.url}: {answer.reason}")
                continue
            listing = answer
            out.statuses.append(
                SourceStatus(
                    REMOTE_KIND,
                    remote.url,
                    "connected",
                    reason=listing.summary(),
                    updated_at=request.now,
                )
            )
            warning = listing.warning()
            if warning is not None:
                out.warnings.append(f"remote {remote.url}: {warning}")
            out.places.append(f"on {cut(listing.host)} ({remote.url})")
            out.stale += listing.stale
            if request.as_json:
                out.arrays.append(json_array(listing.records))
            else:
                out.assessed.extend(
                    assess(listing.locks, StaticProcesses(), FrozenClock(request.now), request.host)
                )
        return out

    def feeds(self, clock: Clock, host: str) -> Sequence[Feed]:
        from lockwatch.sources.polled import PolledFeed
        from lockwatch.sources.remote.poller import RemotePoller

        return [
            PolledFeed(
                RemotePoller(remote, host=host, clock=clock, timeout=self.timeout),
                host=host,
                interval=self.refresh,
                # The fetch keeps its own deadline and says so itself; the feed's is
                # the net under it, a little later.
                deadline=self.timeout + FEED_GRACE,
                clock=clock,
            )
            for remote in self.remotes
        ]


def find_remote(target: str) -> Found:
    """Another host's lock, named by its `remote:` id: nothing here can judge or
    touch it, so it comes back as `unknown`, for the plan to refuse with the
    command to run on its host."""
    from urllib.parse import urlsplit

    from lockwatch.model.lock import Lock, Reason
    from lockwatch.model.verdict import State, Verdict

    parsed = ids.parse_remote(target)
    if parsed is None:
        raise SourceError(
            f"{target!r} is not a remote lock id (remote:<serve URL>#<the lock's id there>)"
        )
    url, inner = parsed
    from lockwatch.model.hosts import is_local_address

    there = urlsplit(url).hostname or url
    # A loopback serve may be this host's or a tunnel's: "not here" would be a guess.
    local = is_local_address(there)
    why = f"judged by the serve at {url}" if local else f"judged on {there}, not here"
    from lockwatch.sources.remote.facts import RemoteOrigin

    origin = RemoteOrigin(url, there, inner, "unknown", (("remote", why),))
    lock = Lock(id=target, source=REMOTE_KIND, format="remote", name=inner, path=None, facts=origin)
    return lock, Verdict(State.UNKNOWN, (Reason("remote", why),)), [lock]


SOURCE = RemoteSource()
