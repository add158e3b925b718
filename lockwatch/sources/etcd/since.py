"""The keys under a poll's prefixes, from the last poll's and what etcd says
changed since, without reading every key again.

A range of 10,000 keys is 1.6 MB of JSON that etcd takes ~90 ms to write. After
one whole read (every key under each prefix at a revision, in etcd's order), a
poll asks in one transaction (so at one revision) for each prefix's keys
written since (min_mod_revision: created or changed) and how many keys each
of up to 64 spans of the prefix holds now (count_only), the spans cut at the
keys known. A key there now was either written since or is as it was, so where
a span's count is that of its keys known plus those new in it, none of them
was deleted; a span whose count is 0 lost them all. A span short otherwise (a
release, a lease run out) is cut again and its parts counted at that revision,
for a few rounds while they are large, and then the parts still short have
their keys listed (keys_only, at that revision): the keys they lack are gone.
With 10,000 keys and 100 gone anywhere, that is a few small transactions.

Where that cannot be told (too many keys gone, a gateway that does not do
transactions, a revision compacted in between, the revision gone back, another
cluster answering), the answer is None, and the poll reads the prefixes whole.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from lockwatch.sources.etcd.gateway import (
    Gateway,
    GatewayError,
    KeyValue,
    Ranged,
    encode,
    prefix_end,
)

# etcd takes 128 operations a transaction unless told otherwise (--max-txn-ops).
TXN_OPS = 128
# Spans a prefix is cut into, at most: each one etcd counts in the first
# transaction.
SPANS = 64
# A span short is cut again (its parts counted, at most CUTS a round, in
# transactions of TXN_OPS) while it holds more than SMALL keys, for up to
# ROUNDS rounds; then the spans still short have their keys listed, LISTED at
# most; past that, a whole read is as cheap.
SMALL = 16
CUTS = 4 * (TXN_OPS - 1)
ROUNDS = 3
LISTED = 2_000
# Keys gone past which the spans left to list would hold more than LISTED.
GONE = 200


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
    keys: list[str]  # those known in it and those new in it since, in etcd's order
    count: int  # how many etcd holds in it now


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
            keys_in = keys[number * size : (number + 1) * size]
            if new[number]:
                keys_in = sorted(keys_in + new[number], key=raw)
            if len(keys_in) != count:
                short.append(_Span(prefix, bounds[number], bounds[number + 1], keys_in, count))
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
    if sum(len(span.keys) - span.count for span in short) > GONE:
        return False
    at = str(revision)
    for _ in range(ROUNDS):
        big = [span for span in short if span.count and len(span.keys) > SMALL]
        if not big:
            break
        parts = max(2, CUTS // len(big))
        cut: list[_Span] = []
        for span in big:
            size = -(-len(span.keys) // parts)
            bounds = [span.start, *map(encode, span.keys[size::size]), span.end]
            for number, (start, end) in enumerate(pairwise(bounds)):
                part = span.keys[number * size : (number + 1) * size]
                cut.append(_Span(span.prefix, start, end, part, -1))
        counts = _ranges(gateway, [_ask(span, "count_only", at) for span in cut])
        if counts is None:
            return False
        for span, (_, _, count) in zip(cut, counts, strict=True):
            span.count = count
        short = [span for span in short if not span.count or len(span.keys) <= SMALL]
        short += [span for span in cut if span.count != len(span.keys)]
    if any(span.count > len(span.keys) for span in short):
        return False  # a key neither known nor written since: not as etcd has them
    for span in short:
        if not span.count:  # all gone: nothing to list
            for key in span.keys:
                del found[span.prefix][key]
    listed = [span for span in short if span.count]
    if sum(len(span.keys) for span in listed) > LISTED:
        return False
    answers = _ranges(gateway, [_ask(span, "keys_only", at) for span in listed])
    if answers is None:
        return False
    for span, (kvs, more, _) in zip(listed, answers, strict=True):
        there = {kv.key for kv in kvs}
        if more or len(there) != span.count or not there <= set(span.keys):
            return False
        keys = found[span.prefix]
        for key in span.keys:
            if key not in there:
                del keys[key]
    return True


def _ask(span: _Span, what: str, revision: str) -> dict[str, Any]:
    """A range over `span` at `revision`, for its count or its keys alone."""
    return {"key": span.start, "range_end": span.end, what: True, "revision": revision}


def _ranges(gateway: Gateway, requests: list[dict[str, Any]]) -> list[Ranged] | None:
    """Each request's answer, in transactions of TXN_OPS ranges; None when one
    is refused (etcd compacted past their revision in between) or odd."""
    answers: list[Ranged] = []
    for start in range(0, len(requests), TXN_OPS):
        try:
            answer = gateway.ranges(requests[start : start + TXN_OPS])
        except GatewayError:
            return None
        if answer is None:
            return None
        answers += answer[1]
    return answers
