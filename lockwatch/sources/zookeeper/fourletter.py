"""ZooKeeper's `cons` four-letter word: which client each session is connected
from, on one server.

ZooKeeper (3.5+) answers only the words `4lw.commands.whitelist` names (`srvr`
alone by default); any other gets "<word> is not executed because it is not in
the whitelist." Every read has a deadline and a byte cap.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from lockwatch.model.lazyre import lazy_compile

# A server with many clients answers a line of ~250 bytes each.
MAX_ANSWER = 4 * 1024 * 1024
WHITELIST_LINE = "4lw.commands.whitelist=srvr,cons"

# ` /127.0.0.1:54321[1](queued=0,recved=5,...,sid=0x100000a1b2c0000,lop=PING,...)`
_CONNECTION = lazy_compile(r"\s*/?(?P<addr>\S+?)\[\d+\]\((?P<fields>[^)]*)\)")
_SID = lazy_compile(r"(?:^|,)sid=0x(?P<sid>[0-9a-fA-F]+)")


@dataclass(frozen=True)
class Connections:
    """What one server said of its connections: session id → client address;
    `why`: why it said nothing (not whitelisted, not reachable)."""

    server: str
    sessions: dict[int, str]
    why: str | None = None


def ask(host: str, port: int, word: bytes, timeout: float) -> bytes:
    """The server's whole answer to `word`, within `timeout` seconds in all."""
    ends = time.monotonic() + timeout
    with socket.create_connection((host, port), timeout=max(timeout, 0.05)) as sock:
        sock.sendall(word)
        answer = bytearray()
        while True:
            left = ends - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{word.decode()} not answered within {timeout:.1f}s")
            sock.settimeout(left)
            piece = sock.recv(65536)
            if not piece:
                return bytes(answer)
            answer += piece
            if len(answer) > MAX_ANSWER:
                raise ValueError(f"{word.decode()}: its answer is over {MAX_ANSWER} bytes")


def parse_cons(text: str) -> dict[int, str]:
    sessions: dict[int, str] = {}
    for line in text.splitlines():
        match = _CONNECTION.match(line)
        if match is None:
            continue
        sid = _SID.search(match["fields"])
        if sid is not None and int(sid["sid"], 16):
            sessions[int(sid["sid"], 16)] = match["addr"]
    return sessions


def connections(host: str, port: int, timeout: float) -> Connections:
    name = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        text = ask(host, port, b"cons", timeout).decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        return Connections(name, {}, f"{name} did not answer cons ({exc or type(exc).__name__})")
    if "not in the whitelist" in text or "not executed" in text:
        return Connections(
            name, {}, f"{name} does not answer cons: add `{WHITELIST_LINE}` to its zoo.cfg"
        )
    return Connections(name, parse_cons(text))
