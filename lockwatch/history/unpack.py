"""A span's entry packed against its lock's first (`lockrefs.base`): zlib with
the base as its dictionary, so a lock that changed a little costs a little."""

from __future__ import annotations

import zlib


def pack(whole: bytes, base: bytes) -> bytes:
    """`whole` compressed against the lock's first entry (mostly the same bytes)."""
    packer = zlib.compressobj(6, zdict=base)
    return packer.compress(whole) + packer.flush()


def unpack(packed: bytes | None, base: bytes, most: int) -> bytes:
    """What `pack` packed (None: the base itself), at most `most` bytes."""
    if packed is None:
        return base
    unpacker = zlib.decompressobj(zdict=base)
    whole = unpacker.decompress(packed, most)
    if unpacker.unconsumed_tail:
        raise ValueError("an entry larger than lockwatch reads")
    return whole
