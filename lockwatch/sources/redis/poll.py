"""Polling Redis for lock records: one server, or a Redlock group of servers
polled together so each of its locks is shown once, with its quorum."""

from __future__ import annotations

from datetime import timedelta

from lockwatch.clock import Clock
from lockwatch.model.lock import Lock
from lockwatch.sources.polled import Polled
from lockwatch.sources.redis.endpoint import RedisEndpoint
from lockwatch.sources.redis.records import group_locks, group_name, to_locks
from lockwatch.sources.redis.server import RedisServer, RedisSnapshot

# Sleeps and clocks disagree by a little: a retry due this much later is due now.
_SLACK = timedelta(milliseconds=200)


class RedisPoller:
    """A server on its own (`group` False), or the servers of one Redlock group."""

    def __init__(
        self,
        servers: list[RedisServer],
        *,
        group: bool = False,
        limits: tuple[tuple[str, int], ...] = (),
    ) -> None:
        self.servers = servers
        self.group = group
        self.limits = dict(limits)
        self.server = group_name([s.name for s in servers]) if group else servers[0].name
        self.name = f"redis:{self.server}"

    @staticmethod
    def of(
        endpoints: tuple[RedisEndpoint, ...],
        patterns: tuple[str, ...],
        clock: Clock,
        *,
        group: bool = False,
        exact: tuple[str, ...] = (),
        limits: tuple[tuple[str, int], ...] = (),
    ) -> RedisPoller:
        """`limits`: redis-semaphore's limits by semaphore name, where configured."""
        servers = [
            RedisServer(endpoint, patterns, clock=clock, exact=exact) for endpoint in endpoints
        ]
        return RedisPoller(servers, group=group, limits=limits)

    @property
    def clock(self) -> Clock:
        return self.servers[0].clock

    def poll(self) -> Polled:
        now = self.clock.now()
        members: list[tuple[str, RedisSnapshot | None, str | None]] = []
        for server in self.servers:
            retry_at = server.status.next_retry_at
            # A group is polled on its interval while some members answer: a member
            # still in its backoff counts as unreachable this time. (A server on its
            # own is polled when the feed's wait, its backoff, is over.)
            due = not self.group or retry_at is None or retry_at <= now + _SLACK
            fresh = server.poll() if due else None
            members.append((server.name, fresh, server.status.reason))
        statuses = tuple(server.status for server in self.servers)
        answered = [snapshot for _, snapshot, _ in members if snapshot is not None]
        if not answered:
            retry = min(server.retry_in for server in self.servers)
            return Polled(self.clock.now(), statuses, None, retry_in=retry)
        locks: list[Lock] = []
        if self.group:
            locks.extend(group_locks(self.server, members))
        for server, (_, snapshot, _) in zip(self.servers, members, strict=True):
            # A member that did not answer keeps its own locks on screen, aged
            # (its status says since when); its Redlock copies count as unknown.
            snapshot = snapshot or server.last
            if snapshot is not None:
                locks.extend(to_locks(snapshot, skip_redlock=self.group, limits=self.limits))
        return Polled(max(snapshot.polled_at for snapshot in answered), statuses, locks)

    def close(self) -> None:
        for server in self.servers:
            server.close()
