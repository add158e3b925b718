"""A span's entry packed against its lock's first (`lockrefs.base`): raw
deflate with the base as its dictionary, so a lock that changed a little costs
a little (no zlib header or checksum: the database keeps the bytes whole)."""

from __future__ import annotations

import zlib

# Raw deflate (no zlib header, no adler32): six bytes a row fewer.
_RAW = -15


def pack(whole: bytes, base: bytes) -> bytes:
    """`whole` compressed against the lock's first entry (mostly the same bytes)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, _RAW, 9, zdict=base)
    return packer.compress(whole) + packer.flush()


def unpack(packed: bytes | None, base: bytes, most: int, *, version: int = 2) -> bytes:
    """What `pack` packed (None: the base itself), at most `most` bytes; a
    schema version 1 file's entries are zlib streams."""
    if packed is None:
        return base
    unpacker = zlib.decompressobj(_RAW if version >= 2 else zlib.MAX_WBITS, zdict=base)
    whole = unpacker.decompress(packed, most)
    if unpacker.unconsumed_tail:
        raise ValueError("an entry larger than lockwatch reads")
    return whole
