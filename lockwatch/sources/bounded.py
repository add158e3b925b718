"""JSON answers from servers lockwatch does not control (another host's serve,
etcd's JSON gateway), read bounded before they are parsed.

A hostile server can send gzip of `{"locks":[{},{},…]}`: 51 KB on the wire,
50 MiB decoded, and 17 million objects once parsed (1.64 GB). So an answer is
decoded here from its raw bytes a piece at a time (never a whole gzip member
at once), and both its decoded size and the number of JSON values it can hold
are counted as it arrives: past either cap, reading stops. The values are
counted from the bytes that open or separate them (`{`, `[`, `,`): a string
holding those counts too, so the count can only be over, never under.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

# Decoded bytes handed on at a time: what a highly compressed piece can cost.
PIECE = 256 * 1024
_KIB = 1024
_MIB = 1024 * _KIB


class TooLarge(ValueError):
    """An answer over a cap; the message says which, in a few words."""


class Undecodable(ValueError):
    """A body in an encoding not asked for, or not what its encoding says."""


class Budget:
    """What one answer may be: at most `max_bytes` decoded and `max_values` JSON values."""

    def __init__(self, max_bytes: int, max_values: int) -> None:
        self.max_bytes = max_bytes
        self.max_values = max_values
        self.size = 0
        self.values = 0

    def take(self, piece: bytes) -> None:
        """Count `piece` in; TooLarge once the answer is over a cap."""
        self.size += len(piece)
        if self.size > self.max_bytes:
            raise TooLarge(f"over {size_words(self.max_bytes)} decoded")
        self.values += piece.count(b",") + piece.count(b"{") + piece.count(b"[")
        if self.values > self.max_values:
            raise TooLarge(f"over {self.max_values:,} JSON values")


def decoded(raw: Iterable[bytes], encoding: str | None) -> Iterator[bytes]:
    """`raw` (the body as sent) decoded, in pieces of at most PIECE bytes
    (Undecodable: an encoding not asked for, or a body that is not what its
    encoding says)."""
    coding = (encoding or "").strip().lower()
    if coding in ("", "identity"):
        yield from raw
        return
    if coding not in ("gzip", "x-gzip", "deflate"):
        raise Undecodable(f"an encoding lockwatch did not ask for ({coding[:40]})")
    unpack = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or a zlib header
    try:
        for chunk in raw:
            data = chunk
            while data:
                piece = unpack.decompress(data, PIECE)
                if piece:
                    yield piece
                data = unpack.unconsumed_tail
        rest = unpack.flush()
    except zlib.error:
        raise Undecodable(f"not the {coding} it says it is") from None
    if rest:
        yield rest


def read(pieces: Iterable[bytes], budget: Budget) -> bytearray:
    """Every piece, joined (one buffer, never a list and its copy), within `budget`."""
    body = bytearray()
    for piece in pieces:
        budget.take(piece)
        body += piece
    return body


def response_body(response: httpx.Response, budget: Budget) -> bytearray:
    """An httpx response's body, decoded a piece at a time within `budget`
    (TooLarge, Undecodable past it)."""
    import httpx

    pieces: Iterable[bytes]
    try:
        # Read already (a transport that hands over whole answers: tests' mock):
        # decoded by httpx, still counted against the caps.
        pieces = [response.content]
    except httpx.ResponseNotRead:
        pieces = decoded(response.iter_raw(), response.headers.get("content-encoding"))
    return read(pieces, budget)


def answer_body(
    response: httpx.Response, path: str, budget: Budget, refused: Callable[[str], Exception]
) -> bytearray:
    """`response_body`, or the client's own error (`refused`) saying that the answer
    to `path` was over a cap, or not what it said it was, and so not read."""
    try:
        return response_body(response, budget)
    except (TooLarge, Undecodable) as exc:
        raise refused(f"{path}: its answer is {exc}: refused, not read") from None


def size_words(size: int) -> str:
    for unit, name in ((_MIB, "MiB"), (_KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size:,} bytes"
