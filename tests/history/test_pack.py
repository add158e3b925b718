"""Entries packed against their lock's first (history/unpack.py) come back byte
for byte, digests and all, and a damaged one is refused, never misread."""

from __future__ import annotations

import hashlib
import random
import re
import zlib

import pytest

from lockwatch.history.unpack import _pack_deflate, pack, unpack


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


def _lock(pid: int, at: str, digest: str, state: str = "active") -> bytes:
    return (
        f'{{"id":"file:/srv/a.lock","holder":{{"pid":{pid}}},"acquired_at":{{"~t":"{at}"}},'
        f'"content":{{"pid":{pid}}},"sha256":"{digest}","state":"{state}",'
        f'"message":"pid {pid} is running","n":"007"}}'
    ).encode()


def test_a_change_of_numbers_costs_the_numbers() -> None:
    old, new = hashlib.sha256(b"0").hexdigest(), hashlib.sha256(b"1").hexdigest()
    base = _lock(10005, "2026-12-06T23:59:55Z", old)
    whole = _lock(10036, "2026-12-07T00:00:57Z", new)
    packed = pack(whole, base)
    # The mark, the new digest, the count of changes, then each: a gap and a delta.
    assert packed[0] & 0x80 and len(packed) <= 1 + 32 + 1 + 2 * 4 + 1
    assert unpack(packed, base, 1 << 20) == whole
    # A digest that did not change costs nothing: a mask says which did.
    same = _lock(10036, "2026-12-06T23:59:55Z", old)
    assert len(pack(same, base)) <= 3 + 2 * 3
    assert unpack(pack(same, base), base, 1 << 20) == same
    assert unpack(pack(base, base), base, 1 << 20) == base


@pytest.mark.parametrize(
    ("pid", "at"),
    [
        (9, "2026-12-06T23:59:55Z"),  # fewer digits
        (10005, "1999-01-01T00:00:00Z"),  # a time back
        (10005, "2026-13-40T25:61:61Z"),  # no time: said as text
        (123456789012345678901234567890, "9999-12-31T23:59:59Z"),
    ],
)
def test_any_numbers_come_back_as_they_were(pid: int, at: str) -> None:
    digest = hashlib.sha256(b"0").hexdigest()
    base = _lock(10005, "2026-12-06T23:59:55Z", digest)
    whole = _lock(pid, at, digest).replace(b'"007"', b'"7"')  # a leading zero gone
    assert unpack(pack(whole, base), base, 1 << 20) == whole


def test_a_change_of_text_deflates_the_text_only() -> None:
    old, new = hashlib.sha256(b"0").hexdigest(), hashlib.sha256(b"1").hexdigest()
    base = _lock(10005, "2026-12-06T23:59:55Z", old)
    whole = _lock(10036, "2026-12-07T00:00:57Z", new, state="stale")
    packed = pack(whole, base)
    assert packed[0] & 0x80 and len(packed) < len(_pack_deflate(whole, base))
    assert unpack(packed, base, 1 << 20) == whole
    # Numbers more or fewer: not the base's pieces in turn, all deflated.
    other = whole.replace(b'"n":"007"', b'"n":"0-0-7"')
    assert not pack(other, base)[0] & 0x80
    assert unpack(pack(other, base), base, 1 << 20) == other


def test_a_damaged_numbered_entry_is_refused() -> None:
    old, new = hashlib.sha256(b"0").hexdigest(), hashlib.sha256(b"1").hexdigest()
    base = _lock(10005, "2026-12-06T23:59:55Z", old)
    packed = pack(_lock(10036, "2026-12-07T00:00:57Z", new), base)
    assert packed[0] & 0x80
    for cut in range(1, len(packed)):
        with pytest.raises(ValueError):
            unpack(packed[:cut], base, 1 << 20)
    with pytest.raises(ValueError):
        unpack(packed + b"\x00", base, 1 << 20)
    with pytest.raises(ValueError):
        unpack(bytes([packed[0] + 1]) + packed[1:], base, 1 << 20)
    with pytest.raises(ValueError, match="larger"):
        unpack(packed, base, 10)


def test_a_number_said_in_several_places_is_said_once() -> None:
    digest = hashlib.sha256(b"0").hexdigest()
    base = _lock(10005, "2026-12-06T23:59:55Z", digest)
    whole = _lock(10036, "2026-12-06T23:59:55Z", digest)
    packed = pack(whole, base)
    # The mark, the mask, one change (gap, delta): the pid's other two places go unsaid.
    assert packed[0] & 0x20 and len(packed) <= 5
    assert unpack(packed, base, 1 << 20) == whole


def test_random_changes_of_numbers_come_back() -> None:
    rng = random.Random(44)
    template = b'{"a":7,"b":[7,7,"7 x 7"],"t":"2026-12-06T23:59:55Z","c":"%s","d":07,"e":123}'
    base = template % hashlib.sha256(b"0").hexdigest().encode()
    pieces = re.split(rb"(\d+)", base)
    for _ in range(300):
        changed = [
            piece if n % 2 == 0 or rng.random() < 0.5 else str(rng.choice([7, 8, 0, 123])).encode()
            for n, piece in enumerate(pieces)
        ]
        whole = b"".join(changed)
        assert unpack(pack(whole, base), base, 1 << 20) == whole
