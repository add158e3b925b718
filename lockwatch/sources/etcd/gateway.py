"""etcd v3 through its documented JSON gateway (grpc-gateway), with httpx.

etcd ≥ 3.4 serves it under /v3/, 3.3 under /v3beta/ (and 3.2 /v3alpha/): the
first request finds which. Keys and values travel base64-encoded, 64-bit
numbers as strings, and fields equal to their default are left out (an empty
value, a key with no lease).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from lockwatch.sources.etcd.endpoint import EtcdEndpoint

if TYPE_CHECKING:
    import httpx

PREFIXES = ("/v3", "/v3beta", "/v3alpha")
# One answer of the gateway, read bounded before it is parsed (sources/bounded.py):
# a range of 10,000 keys is 1.6 MB and about 100,000 values; a server (or what
# answers in its place) sending more is refused, not parsed.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
MAX_ANSWER_VALUES = 4_000_000


class GatewayError(Exception):
    """etcd answered with an error (or not with JSON); the message is etcd's."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str  # surrogateescape text: exactly etcd's bytes
    value: str
    create_revision: int
    mod_revision: int
    version: int
    lease: int  # 0: none


def encode(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")


def decode(data: str | None) -> str:
    # a2b_base64 is what b64decode calls (as lenient), without its checks per call.
    return binascii.a2b_base64(data).decode("utf-8", "surrogateescape") if data else ""


def prefix_end(prefix: str) -> str:
    """The range_end that makes a range cover every key starting with `prefix`."""
    raw = bytearray(prefix.encode("utf-8", "surrogateescape"))
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return encode("\0")  # every key
    raw[-1] += 1
    return base64.b64encode(bytes(raw)).decode("ascii")


def _int(value: Any) -> int:
    return int(value) if value not in (None, "") else 0


def _kv(kv: dict[str, Any]) -> KeyValue:
    get = kv.get
    return KeyValue(
        decode(get("key")),
        decode(get("value")),
        _int(get("create_revision")),
        _int(get("mod_revision")),
        _int(get("version")),
        _int(get("lease")),
    )


# One range of a transaction's answer: its keys, whether there were more than
# its limit, and its count (of every key in the range, whatever the limit).
Ranged = tuple[list[KeyValue], bool, int]


class Gateway:
    """One etcd server's gateway on one HTTP connection (kept alive)."""

    def __init__(
        self,
        endpoint: EtcdEndpoint,
        timeout: float = 2.0,
        transport: httpx.BaseTransport | None = None,
        *,
        keep: bool = False,
    ) -> None:
        """`transport`: httpx's, by default (tests hand in a mock one). `keep`:
        a range answers the very KeyValue of the last range of its prefix for
        each key etcd answers exactly as then (see range_prefix)."""
        import httpx

        self.endpoint = endpoint
        self._client = httpx.Client(
            base_url=endpoint.base,
            timeout=timeout,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            # gzip only: what bounded.decoded reads a piece at a time.
            headers={"User-Agent": "lockwatch", "Accept-Encoding": "gzip"},
            transport=transport,
        )
        self._prefix: str | None = None
        # The cluster id of the last answer: a restored cluster has a new one.
        self.cluster = ""
        # With `keep`: each prefix's last range, each key as etcd sent it (every
        # field, still base64 and strings) to the KeyValue made of it.
        self._kept: dict[str, dict[tuple[Any, ...], KeyValue]] | None = {} if keep else None

    def close(self) -> None:
        self._client.close()

    def _read(self, response: httpx.Response, path: str) -> bytearray:
        """The answer's body, decoded a piece at a time within the caps."""
        from lockwatch.sources.bounded import Budget, answer_body

        budget = Budget(MAX_ANSWER_BYTES, MAX_ANSWER_VALUES)
        return answer_body(response, path, budget, GatewayError)

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to `path` (`/kv/range` ...) under the gateway's prefix."""
        prefixes = (self._prefix,) if self._prefix is not None else PREFIXES
        status = 404
        content = bytearray()
        for prefix in prefixes:
            with self._client.stream("POST", f"{prefix}{path}", json=body) as response:
                status = response.status_code
                if status == 404:
                    continue
                self._prefix = prefix
                content = self._read(response, path)
                break
        try:
            # orjson: a range of 10,000 keys is 1.6 MB of JSON, which the stdlib
            # parser takes twice as long over (bench_etcd.py).
            answer = orjson.loads(content)
        except ValueError:
            raise GatewayError(
                f"HTTP {status} from {self.endpoint.name}{path}: not etcd's JSON gateway"
            ) from None
        if not isinstance(answer, dict):
            raise GatewayError(f"unexpected answer from {self.endpoint.name}{path}")
        if "error" in answer or status >= 400:
            message = answer.get("message") or answer.get("error") or f"HTTP {status}"
            raise GatewayError(str(message))
        header = answer.get("header")
        self.cluster = str(header.get("cluster_id") or "") if isinstance(header, dict) else ""
        return answer

    def range_prefix(self, prefix: str, limit: int) -> tuple[int, list[KeyValue], bool]:
        """(the store's revision, the keys under `prefix` with their values, more)."""
        answer = self.call(
            "/kv/range", {"key": encode(prefix), "range_end": prefix_end(prefix), "limit": limit}
        )
        revision = _int(answer.get("header", {}).get("revision"))
        found = answer.get("kvs") or ()
        if self._kept is None:
            return revision, [_kv(kv) for kv in found], bool(answer.get("more"))
        # A key answered field for field as last time is the same KeyValue: no
        # base64 to decode again, and the records made of it know it at once
        # (10,000 keys of which a few changed: a tenth of a poll's time).
        last, kept = self._kept.get(prefix, {}), {}
        kvs = []
        for raw in found:
            get = raw.get
            seen = (
                *(get("key"), get("value"), get("create_revision")),
                *(get("mod_revision"), get("version"), get("lease")),
            )
            kv = last.get(seen)
            if kv is None:
                kv = _kv(raw)
            kept[seen] = kv
            kvs.append(kv)
        self._kept[prefix] = kept
        return revision, kvs, bool(answer.get("more"))

    def ranges(self, requests: list[dict[str, Any]]) -> tuple[int, list[Ranged]] | None:
        """Several ranges (RangeRequests as the gateway takes them) in one
        transaction, so all at one revision: (that revision, each range's answer).
        None when the answer is not one range answer per request (a gateway that
        does not do transactions as etcd does)."""
        answer = self.call("/kv/txn", {"success": [{"request_range": r} for r in requests]})
        responses = answer.get("responses")
        if not isinstance(responses, list) or len(responses) != len(requests):
            return None
        ranged: list[Ranged] = []
        for response in responses:
            each = response.get("response_range") if isinstance(response, dict) else None
            if not isinstance(each, dict):
                return None
            kvs = [_kv(kv) for kv in each.get("kvs") or ()]
            ranged.append((kvs, bool(each.get("more")), _int(each.get("count"))))
        return _int(answer.get("header", {}).get("revision")), ranged

    def get(self, key: str) -> KeyValue | None:
        answer = self.call("/kv/range", {"key": encode(key)})
        kvs = answer.get("kvs") or ()
        return _kv(kvs[0]) if kvs else None

    def time_to_live(self, lease: int) -> tuple[int, int]:
        """(seconds left, seconds granted) of a lease; (-1, 0) when it is gone."""
        answer = self.call("/lease/timetolive", {"ID": str(lease)})
        return _int(answer.get("TTL")), _int(answer.get("grantedTTL"))

    def delete_if_unchanged(self, kv: KeyValue) -> dict[str, Any] | None:
        """Delete `kv.key` in one transaction, only if it is the very key seen:
        same create and mod revision, same lease. The deleted key (prev_kv) when
        it was done; None when the compare failed."""
        key = encode(kv.key)
        answer = self.call(
            "/kv/txn",
            {
                "compare": [
                    {
                        "key": key,
                        "target": "MOD",
                        "result": "EQUAL",
                        "mod_revision": str(kv.mod_revision),
                    },
                    {
                        "key": key,
                        "target": "CREATE",
                        "result": "EQUAL",
                        "create_revision": str(kv.create_revision),
                    },
                    {"key": key, "target": "LEASE", "result": "EQUAL", "lease": str(kv.lease)},
                ],
                "success": [{"request_delete_range": {"key": key, "prev_kv": True}}],
            },
        )
        if not answer.get("succeeded"):
            return None
        responses = answer.get("responses") or [{}]
        deleted = responses[0].get("response_delete_range", {})
        previous = (deleted.get("prev_kvs") or [{}])[0]
        return {
            "deleted": _int(deleted.get("deleted")),
            "revision": _int(answer.get("header", {}).get("revision")),
            "previous_value": decode(previous.get("value")),
        }

    def revoke(self, lease: int) -> bool:
        """Revoke a lease (etcd deletes its keys); False when it was already gone."""
        try:
            self.call("/lease/revoke", {"ID": str(lease)})
        except GatewayError as exc:
            if "lease not found" in str(exc):
                return False
            raise
        return True
