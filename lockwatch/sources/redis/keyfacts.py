"""The facts of one key (or one waiter for it) as a poll read it, for every
Redis library's records: a holder's token is both the key's value and its node
in the wait-for graph, and a waiter waits on the holder's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.stores.facts import REDIS, StoreLock

if TYPE_CHECKING:
    from lockwatch.sources.redis.server import RedisSnapshot

F = TypeVar("F", bound=StoreLock)


def read(kind: type[F], snapshot: RedisSnapshot, key: str, **fields: Any) -> F:
    """`kind`'s facts of `key` on the server `snapshot` read, when it read it."""
    return kind(REDIS, snapshot.server, key, snapshot.polled_at, **fields)


def held(
    kind: type[F], snapshot: RedisSnapshot, key: str, token: str, ttl: float | None, **more: Any
) -> F:
    """`kind`'s facts of `key`, held by `token` with `ttl` seconds left."""
    return read(kind, snapshot, key, value=token, ttl_left=ttl, session=token, **more)


def waiting(
    kind: type[F],
    snapshot: RedisSnapshot,
    key: str,
    session: str,
    position: int,
    holder: str,
    **more: Any,
) -> F:
    """`kind`'s facts of `session` waiting on `key`'s `holder`, `position` in line."""
    more.update(position=position, waiting=True, session=session, blocked_by=(holder,))
    return read(kind, snapshot, key, **more)


def held_lock(facts: StoreLock, lock_id: str, fmt: str, name: str, **more: Any) -> Lock:
    """The record of a key `facts` (`held`'s) say is held: its holder is the token,
    its TTL and expiry theirs."""
    return Lock(
        id=lock_id,
        source=REDIS,
        format=fmt,
        name=name,
        path=None,
        holder=Holder(session=facts.session),
        ttl_seconds=facts.ttl_left,
        expires_at=facts.expires_at,
        facts=facts,
        **more,
    )
