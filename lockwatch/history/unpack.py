"""A span's entry packed against its lock's first (`lockrefs.base`): raw
deflate with the base as its dictionary, so a lock that changed a little costs
a little (no zlib header or checksum: the database keeps the bytes whole).

A file's SHA-256 (64 hex digits) changes with every rewrite and packs worst:
deflate spends a byte on each digit of so short an input. Schema version 2
keeps each such digest as its 32 bytes ahead of the deflated rest:

    count (1 byte) | count * 32 digest bytes | raw deflate of the entry, each
    digest's text there as `"\\x00"` (a byte JSON never holds unescaped)
"""

from __future__ import annotations

import re
import zlib

from lockwatch.model.lazyre import lazy_compile

# Raw deflate (no zlib header, no adler32): six bytes a row fewer.
_RAW = -15
_DIGEST = lazy_compile(rb'"([0-9a-f]{64})"')
_HOLE = b'"\x00"'
_MOST_DIGESTS = 255


def pack(whole: bytes, base: bytes) -> bytes:
    """`whole` compressed against the lock's first entry (mostly the same bytes)."""
    digests: list[bytes] = []

    def hole(match: re.Match[bytes]) -> bytes:
        digests.append(bytes.fromhex(match.group(1).decode()))
        return _HOLE

    rest = _DIGEST.sub(hole, whole, count=_MOST_DIGESTS)
    packer = zlib.compressobj(9, zlib.DEFLATED, _RAW, 9, zdict=base)
    return bytes([len(digests)]) + b"".join(digests) + packer.compress(rest) + packer.flush()


def unpack(packed: bytes | None, base: bytes, most: int, *, version: int = 2) -> bytes:
    """What `pack` packed (None: the base itself), at most `most` bytes; a
    schema version 1 file's entries are zlib streams of the whole entry."""
    if packed is None:
        return base
    if version < 2:
        return _inflate(packed, base, most, zlib.MAX_WBITS)
    count = packed[0] if packed else 0
    cut = 1 + 32 * count
    if len(packed) < cut:
        raise ValueError("a truncated entry")
    rest = _inflate(packed[cut:], base, most, _RAW)
    pieces = rest.split(_HOLE)
    if len(pieces) != count + 1:
        raise ValueError("an entry whose digests do not fit it")
    out = [pieces[0]]
    for n in range(count):
        digest = packed[1 + 32 * n : 1 + 32 * (n + 1)]
        out += [b'"', digest.hex().encode(), b'"', pieces[n + 1]]
    return b"".join(out)


def _inflate(packed: bytes, base: bytes, most: int, wbits: int) -> bytes:
    unpacker = zlib.decompressobj(wbits, zdict=base)
    whole = unpacker.decompress(packed, most)
    if unpacker.unconsumed_tail:
        raise ValueError("an entry larger than lockwatch reads")
    return whole
