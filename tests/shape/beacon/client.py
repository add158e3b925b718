"""Talking to a beacon server: one HTTP request at a time, each with a deadline,
its answer read bounded (a server lockwatch does not control)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlsplit

# Seconds for the connection and for each read of an answer.
TIMEOUT = 5.0
# The most of an answer that is read: a list of leases is far smaller.
MAX_BYTES = 1024 * 1024
PATH = "/v1/leases"


class Unreachable(Exception):
    """The server could not be asked, or its answer was not a beacon's: one line."""


def server_of(url: str) -> str:
    """The server a beacon URL names (host:port): the name its lock ids carry."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"not a beacon URL (http://host:port): {url[:80]}")
    return f"{parts.hostname}:{parts.port}"


def _request(url: str, method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    from http.client import HTTPConnection, HTTPException

    parts = urlsplit(url)
    connection = HTTPConnection(parts.hostname or "", parts.port, timeout=TIMEOUT)
    try:
        connection.request(method, path, headers=headers)
        answer = connection.getresponse()
        body = answer.read(MAX_BYTES + 1)
    except (OSError, HTTPException) as exc:
        raise Unreachable(f"{server_of(url)}: {exc or type(exc).__name__}") from exc
    finally:
        connection.close()
    if len(body) > MAX_BYTES:
        raise Unreachable(f"{server_of(url)}: an answer over {MAX_BYTES} bytes")
    return answer.status, body


def leases(url: str) -> list[dict[str, Any]]:
    """The server's leases, as it lists them."""
    status, body = _request(url, "GET", PATH, {})
    try:
        listed = json.loads(body)["leases"] if status == 200 else None
    except (ValueError, KeyError, TypeError) as exc:
        raise Unreachable(f"{server_of(url)}: not a beacon's answer") from exc
    if not isinstance(listed, list):
        raise Unreachable(f"{server_of(url)}: answered {status}")
    return [lease for lease in listed if isinstance(lease, dict)]


def change(url: str, method: str, key: str, fence: int, token: str, tail: str = "") -> int:
    """`method` on lease `key` if its fence is still `fence` (compare-and-swap on
    the server): the HTTP status (204/200 done, 409 not that fence, 401 token)."""
    headers = {"If-Match": str(fence), "Authorization": f"Bearer {token}"}
    status, _ = _request(url, method, f"{PATH}/{quote(key, safe='')}{tail}", headers)
    return status
