"""A span's entry packed against its lock's first (`lockrefs.base`), so a lock
that changed a little costs a little (no zlib header or checksum: the database
keeps the bytes whole).

A file's SHA-256 (64 hex digits) changes with every rewrite and packs worst:
each such digest is kept as its 32 bytes, its text a hole (`"\\x00"`, a byte
JSON never holds unescaped) in what is packed around it. Two layouts:

- numbers (schema version 3), when the entry is its base's pieces in turn,
  some changed: numbers (runs of digits, `YYYY-MM-DDTHH:MM:SS` times in
  seconds) and the text between them. Deflate spends three or four bytes on
  each place it leaves its dictionary; a new pid, acquired time and file hash
  (the usual change) are said as the numbers that changed instead:

      0x80 | count of digests (< 32) | 0x40 when every digest is new (no
      mask then) | 0x20 when numbers alike change alike (below)
      | varint mask of the digests that are new | 32 bytes per new digest
      | varint count of changed pieces
      | per changed piece: varint gap (pieces skipped) | varint value
      | raw deflate (base as dictionary) of the changed pieces said as text

  a value being `zigzag(delta) << 1` for a number a delta says, else
  `len << 1 | 1`: the piece is that many bytes of the deflated tail (a text
  that changed: a new state's words; a leading zero gone). With 0x20, a
  number left unsaid whose base text is that of a number said changed
  changed as the first such did (a pid in three places is said once), and
  one of that text which did not change is said, a delta of 0;
- deflate (schema version 2, and anything else): count (1 byte, < 0x80) |
  count * 32 digest bytes | raw deflate of the entry with the base as its
  dictionary.
"""

from __future__ import annotations

import calendar
import functools
import re
import time
import zlib

from lockwatch.model.lazyre import lazy_compile

# Raw deflate (no zlib header, no adler32): six bytes a row fewer.
_RAW = -15
_DIGEST = lazy_compile(rb'"([0-9a-f]{64})"')
_HOLE = b'"\x00"'
# A deflated entry's count byte stays below 0x80 (the numbers layout's mark);
# digests past these stay text in what is packed.
_MOST_DIGESTS = 127
_MOST_NUMBERED = 31
_NUMBERS = 0x80
_ALL_NEW = 0x40
_ALIKE = 0x20
# A time's digits are one number (seconds), not six. Digits first, a time's
# tail after them (an alternation tried at every digit costs twice the time);
# one whose year is not four digits is no time (`_value` refuses it).
_NUMBER = lazy_compile(rb"(\d+(?:-\d\d-\d\dT\d\d:\d\d:\d\d)?)")
_TIME_TEXT = "%04d-%02d-%02dT%02d:%02d:%02d"
# Changed text past this many bytes: deflating the whole may say it in fewer.
_FEW_TEXT_BYTES = 16


def pack(whole: bytes, base: bytes) -> bytes:
    """`whole` packed against the lock's first entry (mostly the same bytes)."""
    numbered = _pack_numbers(whole, base)
    if numbered is not None and numbered[1] <= _FEW_TEXT_BYTES:
        return numbered[0]
    deflated = _pack_deflate(whole, base)
    if numbered is not None and len(numbered[0]) < len(deflated):
        return numbered[0]
    return deflated


def unpack(packed: bytes | None, base: bytes, most: int, *, version: int = 3) -> bytes:
    """What `pack` packed (None: the base itself), at most `most` bytes; a
    schema version 1 file's entries are zlib streams of the whole entry, a
    version 2 file's all deflated."""
    if packed is None:
        return base
    if version < 2:
        return _inflate(packed, base, most, zlib.MAX_WBITS)
    if version >= 3 and packed and packed[0] & _NUMBERS:
        return _unpack_numbers(packed, base, most)
    count = packed[0] if packed else 0
    cut = 1 + 32 * count
    if len(packed) < cut:
        raise ValueError("a truncated entry")
    rest = _inflate(packed[cut:], base, most, _RAW)
    pieces = rest.split(_HOLE)
    if len(pieces) != count + 1:
        raise ValueError("an entry whose digests do not fit it")
    return _fill(pieces, [packed[1 + 32 * n : 1 + 32 * (n + 1)] for n in range(count)])


def _holed(data: bytes, most: int) -> tuple[bytes, list[bytes]]:
    """`data` with its first `most` digests holes, and those digests' bytes."""
    digests: list[bytes] = []

    def hole(match: re.Match[bytes]) -> bytes:
        digests.append(bytes.fromhex(match.group(1).decode()))
        return _HOLE

    return _DIGEST.sub(hole, data, count=most), digests


def _fill(pieces: list[bytes], digests: list[bytes]) -> bytes:
    out = [pieces[0]]
    for digest, piece in zip(digests, pieces[1:], strict=True):
        out += [b'"', digest.hex().encode(), b'"', piece]
    return b"".join(out)


def _pack_deflate(whole: bytes, base: bytes) -> bytes:
    rest, digests = _holed(whole, _MOST_DIGESTS)
    packer = zlib.compressobj(9, zlib.DEFLATED, _RAW, 9, zdict=base)
    return bytes([len(digests)]) + b"".join(digests) + packer.compress(rest) + packer.flush()


def _inflate(packed: bytes, base: bytes, most: int, wbits: int) -> bytes:
    unpacker = zlib.decompressobj(wbits, zdict=base)
    whole = unpacker.decompress(packed, most)
    if unpacker.unconsumed_tail:
        raise ValueError("an entry larger than lockwatch reads")
    return whole


# --- the numbers layout ----------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("a truncated entry")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7


def _value(token: bytes) -> int:
    if len(token) == 19 and token[10:11] == b"T":
        # The pattern put digits where these are read: no parser needed.
        return calendar.timegm(
            (
                int(token[0:4]),
                int(token[5:7]),
                int(token[8:10]),
                int(token[11:13]),
                int(token[14:16]),
                int(token[17:19]),
            )
        )
    return int(token)


def _text(value: int, like: bytes) -> bytes:
    """A number's text, written as the base's (`like`) is: a time, or digits
    as wide as the base's at least (its leading zeros kept)."""
    if len(like) == 19 and like[10:11] == b"T":
        return (_TIME_TEXT % time.gmtime(value)[:6]).encode()
    return str(value).zfill(len(like)).encode()


def _said(new: bytes, old: bytes) -> bytes | None:
    """A changed number as its delta, or None where a delta does not say it."""
    try:
        value = _value(new)
        delta = value - _value(old)
        if _text(value, old) == new:
            return _varint((delta * 2 if delta >= 0 else -delta * 2 - 1) << 1)
    except (ValueError, OverflowError, OSError):
        pass  # not a time after all (a 13th month): its text, then
    return None


@functools.lru_cache(maxsize=1024)
def _numbers_of(base: bytes) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """A base's pieces and numbers in turn (digests holed), and its digests: a
    recorder packs each lock's changes against the same base (kept: a bytes
    object keeps its hash, so finding it again costs a comparison)."""
    rest, digests = _holed(base, _MOST_NUMBERED + 1)
    return tuple(_NUMBER.split(rest)), tuple(digests)


def _pack_numbers(whole: bytes, base: bytes) -> tuple[bytes, int] | None:
    """The numbers layout and its bytes of text, or None where the entry is
    not its base's pieces and numbers, some changed, in the same order."""
    rest, digests = _holed(whole, _MOST_NUMBERED + 1)
    base_tokens, base_digests = _numbers_of(base)
    if len(digests) != len(base_digests) or len(digests) > _MOST_NUMBERED:
        return None
    tokens = _NUMBER.split(rest)
    if len(tokens) != len(base_tokens):
        return None
    new = [n for n, (a, b) in enumerate(zip(digests, base_digests, strict=True)) if a != b]
    head = _NUMBERS | len(digests)
    if len(new) == len(digests) and digests:
        out = [bytes([head | _ALL_NEW])]
    else:
        out = [bytes([head]), _varint(sum(1 << n for n in new)) if digests else b""]
    out += [digests[n] for n in new]
    changes, texts = _changes(tokens, base_tokens, alike=False)
    alike = _changes(tokens, base_tokens, alike=True)
    if len(alike[0]) < len(changes):
        out[0] = bytes([out[0][0] | _ALIKE])
        changes, texts = alike
    # Their count: an entry cut short is refused, not read as fewer changes.
    out += [_varint(len(changes) // 2), *changes]
    if texts:
        packer = zlib.compressobj(9, zlib.DEFLATED, _RAW, 9, zdict=base)
        out += [packer.compress(b"".join(texts)), packer.flush()]
    return b"".join(out), sum(len(text) for text in texts)


def _changes(
    tokens: list[bytes], base_tokens: tuple[bytes, ...], *, alike: bool
) -> tuple[list[bytes], list[bytes]]:
    """The changed pieces as (gap, value) pairs, and the texts for the tail.
    `alike`: a number that changed as the first change of the same base number
    did (a pid said in three places) goes unsaid; one that did not change while
    another of its base's text did is said (a delta of 0)."""
    first: dict[bytes, int] = {}
    if alike:
        for n in range(1, len(tokens), 2):
            if tokens[n] != base_tokens[n]:
                first.setdefault(base_tokens[n], n)
    changes: list[bytes] = []
    texts: list[bytes] = []
    last = -1
    for n, (token, old) in enumerate(zip(tokens, base_tokens, strict=True)):
        if n & 1 and old in first:
            if n != first[old] and token == tokens[first[old]]:
                continue
        elif token == old:
            continue
        said = _said(token, old) if n & 1 else None
        if said is None:
            said = _varint(len(token) << 1 | 1)
            texts.append(token)
        changes += [_varint(n - last - 1), said]
        last = n
    return changes, texts


def _unpack_numbers(packed: bytes, base: bytes, most: int) -> bytes:
    head = packed[0]
    count = head & _MOST_NUMBERED
    base_tokens, base_digests = _numbers_of(base)
    digests = list(base_digests)
    if len(digests) != count:
        raise ValueError("an entry whose digests do not fit its base")
    at, mask = 1, (1 << count) - 1
    if count and not head & _ALL_NEW:
        mask, at = _read_varint(packed, at)
    for n in range(count):
        if mask >> n & 1:
            if at + 32 > len(packed):
                raise ValueError("a truncated entry")
            digests[n], at = packed[at : at + 32], at + 32
    tokens = list(base_tokens)
    texts: list[tuple[int, int]] = []  # (token, its length): from the deflated tail
    said_at: list[int] = []
    n = -1
    changes, at = _read_varint(packed, at)
    for _ in range(changes):
        gap, at = _read_varint(packed, at)
        said, at = _read_varint(packed, at)
        n += gap + 1
        said_at.append(n)
        if n >= len(tokens):
            raise ValueError("an entry whose numbers do not fit its base")
        if said & 1:
            texts.append((n, said >> 1))
        elif n & 1:
            zigzag = said >> 1
            delta = zigzag >> 1 if not zigzag & 1 else -((zigzag + 1) >> 1)
            tokens[n] = _text(_value(tokens[n]) + delta, tokens[n])
        else:
            raise ValueError("an entry with a delta of text")
    _fill_texts(tokens, texts, packed[at:], base, most)
    if head & _ALIKE:
        _fill_alike(tokens, base_tokens, said_at)
    whole = _fill(b"".join(tokens).split(_HOLE), digests)
    if len(whole) > most:
        raise ValueError("an entry larger than lockwatch reads")
    return whole


def _fill_texts(
    tokens: list[bytes], texts: list[tuple[int, int]], tail: bytes, base: bytes, most: int
) -> None:
    """Each changed text of `texts` in turn from `tail` (raw deflate against
    the base), which must be exactly them."""
    if not texts:
        if tail:
            raise ValueError("an entry with bytes past its end")
        return
    unpacker = zlib.decompressobj(_RAW, zdict=base)
    said = unpacker.decompress(tail, most)
    if not unpacker.eof or unpacker.unused_data or len(said) != sum(n for _, n in texts):
        raise ValueError("an entry whose texts do not fit it")
    at = 0
    for n, size in texts:
        tokens[n], at = said[at : at + size], at + size


def _fill_alike(tokens: list[bytes], base_tokens: tuple[bytes, ...], said_at: list[int]) -> None:
    """Each number not said changed as the first said change of its base's text."""
    changed: dict[bytes, bytes] = {}
    for n in said_at:
        if n & 1 and tokens[n] != base_tokens[n]:
            changed.setdefault(base_tokens[n], tokens[n])
    said = set(said_at)
    for n in range(1, len(tokens), 2):
        if n not in said and base_tokens[n] in changed:
            tokens[n] = changed[base_tokens[n]]
