"""Who may read what: `/healthz` is open (it says nothing about locks);
`/v1/locks` needs the bearer token whenever there is one; `/metrics` too,
unless it is left open (`--open-metrics`). Without a token every endpoint is
open, which `lockwatch serve` allows only on a loopback address.

The token is compared as a SHA-256 digest with `hmac.compare_digest`: the time
taken says nothing about how much of a guess was right, nor about its length.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

HEALTH = "/healthz"
METRICS = "/metrics"
LOCKS = "/v1/locks"
# The recorded episodes (`?since=&until=`): the token as for /v1/locks.
HISTORY = "/v1/history"


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


@dataclass(frozen=True)
class Access:
    token: str | None = field(default=None, repr=False)
    open_metrics: bool = False

    def needs_token(self, endpoint: str) -> bool:
        if self.token is None or endpoint == HEALTH:
            return False
        return not (endpoint == METRICS and self.open_metrics)

    def allows(self, endpoint: str, authorization: str | None) -> bool:
        if not self.needs_token(endpoint):
            return True
        assert self.token is not None
        given = b""
        if authorization:
            scheme, _, value = authorization.strip().partition(" ")
            if scheme.lower() == "bearer":
                given = value.strip().encode("utf-8", "surrogateescape")
        expected = _digest(self.token.encode("utf-8"))
        # Both sides digested: equal-length inputs, compared in constant time.
        return hmac.compare_digest(_digest(given), expected)
