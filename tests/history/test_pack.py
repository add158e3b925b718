"""Entries packed against their lock's first (history/unpack.py) come back byte
for byte, digests and all, and a damaged one is refused, never misread."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from lockwatch.history.unpack import pack, unpack


def _entry(n: int, extra: str = "") -> bytes:
    digest = hashlib.sha256(str(n).encode()).hexdigest()
    return (
        f'{{"id":"file:/srv/{n}.lock","pid":{1000 + n},"sha256":"{digest}",'
        f'"content":{{"{digest}":"x\\"{digest}\\"","k":"{extra}"}}}}'
    ).encode()


@pytest.mark.parametrize(
    "whole",
    [
        _entry(1),
        _entry(2, "a" * 63),
        _entry(3, "b" * 64),
        b'{"two":["' + b"0" * 64 + b'","' + b"f" * 64 + b'"]}',
        b'{"upper":"' + b"A" * 64 + b'"}',
        b"{}",
    ],
)
def test_an_entry_comes_back_as_it_was(whole: bytes) -> None:
    base = _entry(0)
    packed = pack(whole, base)
    assert unpack(packed, base, 1 << 20) == whole
    assert unpack(None, base, 1 << 20) == base


def test_a_digest_costs_its_32_bytes() -> None:
    def one(n: int) -> bytes:
        return f'{{"pid":{n},"sha256":"{hashlib.sha256(bytes(n)).hexdigest()}"}}'.encode()

    assert len(pack(one(7), one(0))) <= 1 + 32 + 16


def test_a_damaged_entry_is_refused() -> None:
    base, whole = _entry(0), _entry(7)
    packed = pack(whole, base)
    with pytest.raises((ValueError, zlib.error)):
        unpack(packed[:40], base, 1 << 20)
    with pytest.raises((ValueError, zlib.error)):
        unpack(bytes([packed[0] + 1]) + packed[1:], base, 1 << 20)
    with pytest.raises(ValueError, match="larger"):
        unpack(packed, base, 10)


def test_a_version_1_entry_is_a_zlib_stream() -> None:
    base, whole = _entry(0), _entry(7)
    old = zlib.compressobj(6, zdict=base)
    assert unpack(old.compress(whole) + old.flush(), base, 1 << 20, version=1) == whole
