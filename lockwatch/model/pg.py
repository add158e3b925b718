"""PostgreSQL lock facts as plain data: advisory keys, backends, pg_locks rows.

Pure: no psycopg here. The source fills these in; verdicts and views read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Literal

_2_31, _2_32, _2_63, _2_64 = 2**31, 2**32, 2**63, 2**64

INSUFFICIENT_PRIVILEGE = "<insufficient privilege>"
# Seconds a holder may sit idle (in a transaction) before its locks count as stale.
DEFAULT_IDLE_AFTER = 60.0


@dataclass(frozen=True, slots=True)
class AdvisoryKey:
    """An advisory lock key as the application passed it.

    pg_advisory_lock(bigint) shows in pg_locks as objsubid 1 with the key split over
    classid (high half) and objid (low half); pg_advisory_lock(int4, int4) as
    objsubid 2 with key1 in classid and key2 in objid. The OID columns are
    unsigned, so negative keys come back as large numbers and must be folded back.
    """

    form: Literal["bigint", "pair"]
    key: int | None = None  # bigint form
    key1: int | None = None  # pair form
    key2: int | None = None

    @staticmethod
    def from_pg_locks(classid: int, objid: int, objsubid: int) -> AdvisoryKey | None:
        if objsubid == 1:
            key = (classid << 32) | objid
            return AdvisoryKey("bigint", key=key - _2_64 if key >= _2_63 else key)
        if objsubid == 2:
            return AdvisoryKey(
                "pair",
                key1=classid - _2_32 if classid >= _2_31 else classid,
                key2=objid - _2_32 if objid >= _2_31 else objid,
            )
        return None

    def __str__(self) -> str:
        if self.form == "bigint":
            return str(self.key)
        return f"{self.key1}:{self.key2}"

    def as_json(self) -> dict[str, object]:
        if self.form == "bigint":
            return {"form": "bigint", "key": self.key}
        return {"form": "pair", "key1": self.key1, "key2": self.key2}


def string_key(name: str) -> int:
    """The bigint key seed 003 derives from a string: BLAKE2b, 8 bytes, signed,
    native (little-endian) byte order, as struct.unpack("q", ...) reads it."""
    import hashlib  # only when the config names string keys

    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


@dataclass(frozen=True)
class AdvisoryNames:
    """What the operator's config calls advisory keys.

    `namespaces` names the first int of the pair form: {1: "agent"} shows (1, 42) as
    `agent:42`. `keys` names single bigint keys, including those hashed from
    strings with `string_key`.
    """

    namespaces: Mapping[int, str]
    keys: Mapping[int, str]

    def name(self, key: AdvisoryKey) -> str:
        if key.form == "pair":
            namespace = self.namespaces.get(key.key1) if key.key1 is not None else None
            return f"{namespace}:{key.key2}" if namespace else str(key)
        assert key.key is not None
        return self.keys.get(key.key, str(key.key))

    @staticmethod
    def build(
        namespaces: dict[int, str] | None = None,
        keys: dict[int, str] | None = None,
        strings: list[str] | tuple[str, ...] = (),
    ) -> AdvisoryNames:
        named = {string_key(text): text for text in strings}
        named.update(keys or {})
        return AdvisoryNames(MappingProxyType(dict(namespaces or {})), MappingProxyType(named))


NO_NAMES = AdvisoryNames.build()


@dataclass(frozen=True, slots=True)
class PgBackend:
    """The session behind a pg_locks row (pg_stat_activity), or a prepared
    transaction, which holds locks with no session at all."""

    pid: int | None
    user: str | None = None
    application: str | None = None
    client: str | None = None
    state: str | None = None
    query: str | None = None
    backend_type: str | None = None
    # Times are on this host's clock: the server's ages added to when we asked.
    xact_start: datetime | None = None
    query_start: datetime | None = None
    state_since: datetime | None = None
    wait_event_type: str | None = None
    wait_event: str | None = None
    prepared_gid: str | None = None

    @property
    def label(self) -> str:
        if self.prepared_gid is not None:
            return f"prepared transaction {self.prepared_gid}"
        return f"pid {self.pid}"

    @property
    def hidden(self) -> bool:
        """Stats hidden from us: we lack pg_read_all_stats (or are not the same user)."""
        return self.query == INSUFFICIENT_PRIVILEGE


@dataclass(frozen=True, slots=True)
class PgLock:
    """One pg_locks row of interest."""

    server: str  # the source's name: a DSN with its password removed
    locktype: str
    mode: str
    granted: bool
    database: str | None
    backend: PgBackend
    advisory_key: AdvisoryKey | None = None
    wait_start: datetime | None = None
    blocked_by: tuple[int, ...] = ()  # pids this session waits on (0: a prepared transaction)
    blocking: tuple[int, ...] = ()  # pids waiting on this session, whatever for
    blocking_here: tuple[int, ...] = ()  # pids waiting on this very lock
    # Prepared transactions among the blockers, named: pg_blocking_pids says only 0.
    blocked_by_prepared: tuple[str, ...] = ()

    def waits_on(self) -> tuple[int | str, ...]:
        """Whom this session waits on: pids, and `prepared:<gid>` for prepared
        transactions (`prepared:?` when the server did not say which)."""
        prepared = [f"prepared:{gid}" for gid in self.blocked_by_prepared]
        if 0 in self.blocked_by and not prepared:
            prepared.append("prepared:?")
        return (*(pid for pid in self.blocked_by if pid), *prepared)
