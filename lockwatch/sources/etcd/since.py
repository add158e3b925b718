"""The keys under a poll's prefixes, from the last poll's and what etcd says
changed since, without reading every key again.

A range of 10,000 keys is 1.6 MB of JSON that etcd takes ~90 ms to write. After
one whole read (every key under each prefix at a revision, in etcd's order), a
poll asks in one transaction (so at one revision) for each prefix's keys
written since (min_mod_revision: created or changed) and how many keys each
of a few spans of the prefix holds now (count_only), the spans cut at the keys
known. A key there now was either written since or is as it was, so where a
span's count is that of its keys known plus those new in it, none of them was
deleted; where it falls short (a release, a lease run out), a second
transaction lists that span's keys (keys_only, at the same revision), and the
keys known that it lacks are gone.

Where that cannot be told (too many spans short, a gateway that does not do
transactions, the revision gone back, another cluster answering), the answer
is None, and the poll reads the prefixes whole.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from lockwatch.sources.etcd.gateway import Gateway, GatewayError, KeyValue, encode, prefix_end

# etcd takes 128 operations a transaction unless told otherwise (--max-txn-ops).
TXN_OPS = 128
# Spans a prefix is cut into, at most: each one etcd counts in the first
# transaction, and lists (its keys alone) in the second when it is short.
SPANS = 64
# Spans short in one poll past which reading the prefixes whole is as cheap.
SHORT_SPANS = 32


@dataclass(frozen=True)
class Known:
    """Every key under each prefix at `revision` (by key, in etcd's order:
    their bytes'), and the id of the cluster that said so."""

    revision: int
    keys: dict[str, dict[str, KeyValue]]
    cluster: str


def raw(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def in_order(keys: dict[str, KeyValue]) -> dict[str, KeyValue]:
    """`keys` in etcd's order, as a range answers."""
    return {key: keys[key] for key in sorted(keys, key=raw)}


@dataclass
class _Span:
    prefix: str
    start: str  # base64, as the gateway takes keys
    end: str
    keys: list[str]  # those known in it, and those new in it since


def read_since(
    gateway: Gateway, prefixes: tuple[str, ...], known: Known, limit: int
) -> Known | None:
    """The keys under `prefixes` now, from `known` and at most two small
    transactions; None when only a whole read can tell, as when a prefix holds
    more than `limit` keys (the whole read says it lists only the first)."""
    if tuple(known.keys) != prefixes or not prefixes or len(prefixes) * 2 > TXN_OPS:
        return None
    cuts = max(1, min(SPANS, (TXN_OPS - len(prefixes)) // len(prefixes)))
    requests: list[dict[str, Any]] = []
    plans: list[tuple[str, list[str], int, list[str]]] = []
    for prefix in prefixes:
        keys = list(known.keys[prefix])
        size = max(1, -(-len(keys) // cuts))
        starts = keys[size::size]  # the first key of every span but the first
        bounds = [encode(prefix), *map(encode, starts), prefix_end(prefix)]
        span = {"key": bounds[0], "range_end": bounds[-1]}
        requests.append({**span, "limit": limit, "min_mod_revision": str(known.revision + 1)})
        requests += [
            {"key": start, "range_end": end, "count_only": True} for start, end in pairwise(bounds)
        ]
        plans.append((prefix, keys, size, bounds))
    try:
        answer = gateway.ranges(requests)
    except GatewayError:  # a transaction too many operations long for this etcd
        return None
    if answer is None:
        return None
    revision, ranged = answer
    if revision < known.revision or gateway.cluster != known.cluster:
        return None
    at = 0
    found: dict[str, dict[str, KeyValue]] = {}
    short: list[_Span] = []
    for prefix, keys, size, bounds in plans:
        (written, more, _), counts = ranged[at], ranged[at + 1 : at + len(bounds)]
        at += len(bounds)
        if more:
            return None
        was = known.keys[prefix]
        now = dict(was)
        new: list[list[str]] = [[] for _ in counts]
        cut_at = [raw(key) for key in keys[size::size]]
        for kv in written:
            if kv.key not in was:
                new[bisect_right(cut_at, raw(kv.key))].append(kv.key)
            now[kv.key] = kv
        for number, (_, _, count) in enumerate(counts):
            keys_in = keys[number * size : (number + 1) * size] + new[number]
            if len(keys_in) != count:
                short.append(_Span(prefix, bounds[number], bounds[number + 1], keys_in))
        if len(now) > limit:
            return None
        found[prefix] = in_order(now) if any(new) else now
    if short and not _drop_deleted(gateway, revision, short, found):
        return None
    return Known(revision, found, known.cluster)


def _drop_deleted(
    gateway: Gateway, revision: int, short: list[_Span], found: dict[str, dict[str, KeyValue]]
) -> bool:
    """Drop from `found` the keys of the `short` spans that etcd no longer has at
    `revision`; False when it cannot be told so."""
    if len(short) > SHORT_SPANS:
        return False
    at = str(revision)
    try:
        answer = gateway.ranges(
            [
                {"key": span.start, "range_end": span.end, "keys_only": True, "revision": at}
                for span in short
            ]
        )
    except GatewayError:  # compacted past `revision` in between
        return False
    if answer is None:
        return False
    for span, (kvs, more, _) in zip(short, answer[1], strict=True):
        there = {kv.key for kv in kvs}
        if more or not there <= set(span.keys):
            return False
        keys = found[span.prefix]
        for key in span.keys:
            if key not in there:
                del keys[key]
    return True
