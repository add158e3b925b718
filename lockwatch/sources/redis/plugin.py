"""The redis source: lock keys in Redis (redis-py's Lock, python-redis-lock,
pottery's Redlock, and keys named like locks), their holders' tokens and TTLs,
python-redis-lock's waiters, and Redlock groups' quorums; Redisson's hash locks,
redis-semaphore's sorted-set semaphores and portalocker's subscription locks
(format modules redisson.py, semaphore.py, subscription.py).

Config table it owns:

    [redis]
    url = ["redis://monitor@cache1:6379/0"]       # a string or a list
    patterns = ["lock:*", "redlock:*", "*lock", "*Lock"]  # SCAN patterns (the default)
    password_file = "~/.config/lockwatch/redis-password"  # if neither URL nor REDISCLI_AUTH has one
    redlock = ["redis://r1", "redis://r2", "redis://r3"]  # one group (or a list of groups)
    semaphore_limits = { "jobs-lock" = 2 }  # redis-semaphore limits (Redis does not keep them)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from lockwatch.sources.contract import (
    Found,
    Selected,
    SourceError,
    Wanted,
)
from lockwatch.sources.redis import ids
from lockwatch.sources.redis.declared import RedisDeclared
from lockwatch.sources.redis.endpoint import DEFAULT_PORT
from lockwatch.sources.selection import StoreSelection
from lockwatch.sources.servers import (
    DEFAULT_REFRESH,
    Listens,
    ServerPlugin,
    config_strings,
    found_in,
    polled_once,
    refresh,
)

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.redis.endpoint import RedisEndpoint
    from lockwatch.sources.redis.poll import RedisPoller

# python-redis-lock, pottery's Redlock, names ending in lock, .lock or :lock, and
# Java's camel case (Redisson's `getLock("orderLock")`). Any type: hashes (Redisson)
# and sorted sets (redis-semaphore's `semaphore:<name>`) are read too. One SCAN walk
# (MATCH *ock*, see patterns.py).
DEFAULT_PATTERNS = ("lock:*", "redlock:*", "*lock", "*Lock")


@dataclass(frozen=True)
class RedisSettings:
    urls: tuple[str, ...] = ()
    patterns: tuple[str, ...] = DEFAULT_PATTERNS
    password_file: str | None = None
    redlock: tuple[tuple[str, ...], ...] = field(default=())
    # redis-semaphore's limits by semaphore name: an argument of each call, never in Redis.
    semaphore_limits: tuple[tuple[str, int], ...] = ()


DEFAULTS = RedisSettings()


def _error(message: str) -> Exception:
    from lockwatch.config import ConfigError

    return ConfigError(message)


def read_settings(data: Mapping[str, Any], where: str) -> RedisSettings:
    table = data.get("redis", {})
    if not isinstance(table, dict):
        raise _error(f"{where}: [redis] must be a table")
    urls = config_strings(table.get("url", []), "redis.url", where)
    patterns = config_strings(
        table.get("patterns", list(DEFAULT_PATTERNS)), "redis.patterns", where
    )
    if not patterns:
        raise _error(f"{where}: redis.patterns must name at least one pattern")
    password_file = table.get("password_file")
    if password_file is not None and (not isinstance(password_file, str) or not password_file):
        raise _error(f"{where}: redis.password_file must be a path")
    redlock = table.get("redlock", [])
    if isinstance(redlock, list) and redlock and all(isinstance(g, list) for g in redlock):
        groups = tuple(config_strings(g, "each redis.redlock group", where) for g in redlock)
    else:
        groups = (config_strings(redlock, "redis.redlock", where),) if redlock else ()
    for group in groups:
        if len(group) < 2:
            raise _error(f"{where}: a redis.redlock group needs at least two servers")
    limits = table.get("semaphore_limits", {})
    if not isinstance(limits, dict) or not all(
        isinstance(name, str) and isinstance(limit, int) and limit > 0
        for name, limit in limits.items()
    ):
        raise _error(
            f"{where}: redis.semaphore_limits must map semaphore names to limits (numbers > 0)"
        )
    return RedisSettings(urls, patterns, password_file, groups, tuple(sorted(limits.items())))


class RedisSource(ServerPlugin, RedisDeclared):
    listens = Listens(
        "a Redis server",
        DEFAULT_PORT,
        # Where Debian's redis-server (and a hand-started one) puts its socket, if enabled.
        ("/run/redis/redis-server.sock", "/var/run/redis/redis-server.sock", "/tmp/redis.sock"),
        f"--redis redis://127.0.0.1:{DEFAULT_PORT} shows its lock keys",
    )

    @property
    def record_types(self) -> tuple[type, ...]:
        # Its facts' types, for recordings: loaded when asked, not at the CLI's start.
        from lockwatch.sources.redis.redisson import RedissonFacts, RedissonOwner
        from lockwatch.sources.redis.semaphore import SemaphoreFacts
        from lockwatch.sources.redis.subscription import SubscriptionFacts
        from lockwatch.sources.stores.facts import Quorum, QuorumMember, StoreClient, StoreLock

        return (
            StoreLock,
            Quorum,
            QuorumMember,
            StoreClient,
            RedissonFacts,
            RedissonOwner,
            SemaphoreFacts,
            SubscriptionFacts,
        )

    def read_config(self, tables: Mapping[str, Any], where: str) -> RedisSettings:
        return read_settings(tables, where)

    def select(self, wanted: Wanted) -> Selected | None:
        from lockwatch.sources.redis.endpoint import named

        settings: RedisSettings = wanted.settings(self.name) or DEFAULTS
        urls, groups = named(wanted, settings)
        if any(len(group) < 2 for group in groups):
            raise SourceError("--redlock: name the group's servers, comma-separated")
        if not urls and not groups:
            return None
        patterns = tuple(wanted.values.get("redis_patterns") or ()) or settings.patterns
        endpoints = _endpoints(urls, wanted, settings)
        grouped = tuple(_endpoints(group, wanted, settings) for group in groups)
        return SelectedRedis(
            endpoints,
            grouped,
            patterns,
            refresh(wanted),
            settings.semaphore_limits,
        )

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return find_redis(target, wanted, host)


def _endpoints(
    urls: Sequence[str], wanted: Wanted, settings: RedisSettings
) -> tuple[RedisEndpoint, ...]:
    from lockwatch.sources.redis.endpoint import parse

    return tuple(parse(url, wanted.environ, settings.password_file) for url in dict.fromkeys(urls))


@dataclass(frozen=True)
class SelectedRedis(StoreSelection):
    kind: ClassVar[str] = "redis"
    endpoints: tuple[RedisEndpoint, ...]
    groups: tuple[tuple[RedisEndpoint, ...], ...]
    patterns: tuple[str, ...]
    refresh: float = DEFAULT_REFRESH
    semaphore_limits: tuple[tuple[str, int], ...] = ()

    def pollers(self, clock: Clock) -> list[RedisPoller]:
        from lockwatch.sources.redis.poll import RedisPoller

        limits = self.semaphore_limits
        pollers = [
            RedisPoller.of((endpoint,), self.patterns, clock, limits=limits)
            for endpoint in self.endpoints
        ]
        pollers += [
            RedisPoller.of(group, self.patterns, clock, group=True, limits=limits)
            for group in self.groups
        ]
        return pollers


def find_redis(target: str, wanted: Wanted, host: str) -> Found | str:
    """The Redis lock `target` names, polled and judged now; or why there is none."""
    from lockwatch.clock import SystemClock
    from lockwatch.sources.redis.endpoint import reach_of
    from lockwatch.sources.redis.poll import RedisPoller

    parsed = ids.parse_redis(target)
    if parsed is None:
        raise SourceError(f"{target!r} is not a Redis lock id as `lockwatch ls --json` prints one")
    settings: RedisSettings = wanted.settings("redis") or DEFAULTS
    reach = reach_of(wanted)
    endpoints = []
    for name in parsed.server.split(","):
        endpoint = reach(name)
        if endpoint is None:
            raise SourceError(f"no Redis server {name} among --redis/--redlock/config")
        endpoints.append(endpoint)
    key, _ = ids.key_of(parsed.key)
    poller = RedisPoller.of(
        tuple(endpoints),
        (),
        SystemClock(),
        group=len(endpoints) > 1,
        exact=(key,),
        limits=settings.semaphore_limits,
    )
    locks = polled_once(poller, parsed.server)
    found = found_in(locks, ids.canonical(target), host)
    return found or f"no lock {target} now: released, or it expired"


SOURCE = RedisSource()
