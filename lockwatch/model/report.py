"""The `lockwatch.ls/1` JSON contract, built from model records only."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from lockwatch.model.holder import pid_here
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Lock
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.timestamps import seconds_since
from lockwatch.model.verdict import State, Verdict

if TYPE_CHECKING:
    from lockwatch.model.blocking import BlockingTree

LS_SCHEMA = "lockwatch.ls/1"
_OPTIONS = orjson.OPT_UTC_Z


def text(value: str) -> str:
    """`value` as JSON can carry it. File names are bytes on Linux: one that is not
    UTF-8 arrives as a str with surrogate escapes, which no JSON encoder accepts;
    its odd bytes are written as `\\xff` instead (as `ls -b` would)."""
    if value.isascii():  # the usual case, told without encoding a copy
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return value


def lock_record(
    lock: Lock,
    verdict: Verdict,
    now: datetime | None = None,
    memo: dict[Any, Any] | None = None,
) -> dict[str, Any]:
    """One lock of the contract, with times still as datetimes: orjson writes them
    (RFC 3339, `Z`) far faster than isoformat() would. `now` dates the ages its
    facts keep (a Postgres session's start is kept, so ages tick without a new
    poll). `memo` shares one session's fields among its many locks within one
    render; the records share those parts, so treat them as read-only."""
    facts = lock.facts
    if facts is None:
        return generic_record(lock, verdict)
    whole = facts.record(lock, verdict, now, {} if memo is None else memo)
    if whole is not None:
        return whole
    record = generic_record(lock, verdict)
    facts.extend_record(record)
    return record


def texts(value: Any) -> Any:
    """`value` with every string in it as JSON can carry it (`text`)."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {key: texts(item) for key, item in value.items()}
    if isinstance(value, list):
        return [texts(item) for item in value]
    return value


def generic_record(lock: Lock, verdict: Verdict) -> dict[str, Any]:
    """The contract's fields every lock has, before its facts add theirs."""
    # Written out for the scan, which makes one per lock file: all-ASCII texts
    # (nearly every one) are told without a call, an empty list is the shared
    # NOTHING, and the state's word is looked up, not asked of the enum.
    process = verdict.process
    holder = lock.holder
    lock_id, name, path, scope = lock.id, lock.name, lock.path, lock.scope
    conflicts = verdict.conflicts_with
    age = verdict.age_seconds
    # Fifteen keys at most in the literal: Python 3.11 builds a longer one a key
    # at a time, growing it, where fifteen come in one presized step.
    record = {
        "id": lock_id if lock_id.isascii() else text(lock_id),
        "source": lock.source,
        "format": lock.format,
        "name": name if name.isascii() else text(name),
        "path": path if path is None or path.isascii() else text(path),
        "state": _STATE_WORDS[verdict.state],
        "reasons": [
            {"code": r.code, "message": m if (m := r.message).isascii() else text(m)}
            for r in verdict.reasons
        ],
        "holder": {
            "pid": process.pid
            if holder.pid_namespace is not None and process is not None
            else holder.pid,  # pid_here, spelt out
            "host": holder.host,
            "actor": holder.actor,
            "session": holder.session,
            "operation": holder.operation,
            "alive": verdict.alive,
            "process": None
            if process is None
            else {
                "cmdline": list(process.cmdline),
                "user": process.user,
                "started_at": process.started_at,
            },
        },
        "acquired_at": lock.acquired_at,
        "heartbeat_at": lock.heartbeat_at,
        "ttl_seconds": lock.ttl_seconds,
        "expires_at": lock.expires_at,
        "age_seconds": None if age is None else round(age, 3),
        "next_change_at": verdict.next_change_at,
        "scope": [text(path) for path in scope] if scope else NOTHING,
    }
    record["conflicts_with"] = [text(other) for other in conflicts] if conflicts else NOTHING
    record["sha256"] = lock.sha256
    return record


# The contract's word for each state (a StrEnum's `value` is a Python property).
_STATE_WORDS: dict[State, str] = {state: state.value for state in State}

# Shared by records that have nothing there; never mutated.
NOTHING: list[Any] = []


def holder_fields(lock: Lock, verdict: Verdict, process: dict[str, Any] | None) -> dict[str, Any]:
    """The contract's holder fields every source shares."""
    holder = lock.holder
    return {
        "pid": pid_here(lock, verdict),
        "host": holder.host,
        "actor": holder.actor,
        "session": holder.session,
        "operation": holder.operation,
        "alive": verdict.alive,
        "process": process,
    }


def rounded_age(start: datetime | None, now: datetime | None) -> float | None:
    """Seconds from `start` to `now`, to the millisecond, as the contract has them."""
    age = seconds_since(start, now)
    return None if age is None else round(age, 3)


def lock_json_bytes(lock: Lock, verdict: Verdict) -> bytes:
    return orjson.dumps(lock_record(lock, verdict), option=_OPTIONS)


# orjson.Fragment (orjson 3.10+): JSON written once, copied as it is where it recurs.
_FRAGMENT: Any = getattr(orjson, "Fragment", None)


def shared_parts(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with its non-empty lists and dicts already written as JSON, for the
    records made from it (a session's alike locks: thousands): records_json_array
    then copies those bytes into each instead of writing them again, the same
    JSON. Without orjson.Fragment, `record` itself."""
    if _FRAGMENT is None:
        return record
    return {
        key: _FRAGMENT(orjson.dumps(value, option=_OPTIONS))
        if value and type(value) in (dict, list)
        else value
        for key, value in record.items()
    }


def records_json_array(records: list[dict[str, Any]]) -> bytes:
    """A JSON array of lock records, in one call: orjson's cost per call is several
    times its cost per record, so never serialise 10,000 locks one by one.

    Every character a terminal would act on or hide (C1 controls such as U+009B,
    bidi and invisible format characters such as U+202E) is written as a `\\uXXXX`
    escape: JSON that decodes to the same strings, and that `ls --json` (or a
    `curl` of serve's /v1/locks) can print to a terminal. orjson escapes only what
    JSON must. All-ASCII output, the usual case, is passed through as is."""
    data = orjson.dumps(records, option=_OPTIONS)
    if data.isascii():
        return data
    # orjson's compact JSON has no raw byte below 0x20 (JSON escapes them, and it
    # writes no whitespace): a piece that is ASCII without DEL has nothing to escape.
    return _escaped_pieces(data, _compact_clean)


def unprintable_escaped(data: bytes) -> bytes:
    """JSON `data` with every unprintable character spelt as a `\\uXXXX` escape."""
    if data.isascii():
        return data
    return _escaped_pieces(data, _printable_ascii)


def _escaped_pieces(data: bytes, clean: Callable[[bytes], bool]) -> bytes:
    """`data` escaped a piece at a time, pieces `clean` passes copied as they are.

    One non-ASCII character (a client's `…`-shortened command line) in a 7 MB
    listing made the whole of it decoded, searched a character at a time and
    encoded again: ~500M instructions, more than the poll itself."""
    pieces = []
    copied = start = 0
    size = len(data)
    while start < size:
        end = min(start + _PIECE, size)
        while end < size and 0x80 <= data[end] < 0xC0:  # never inside a UTF-8 sequence
            end += 1
        piece = data[start:end]
        if not clean(piece):
            pieces.append(data[copied:start])  # the clean run before it, in one copy
            pieces.append(_NON_ASCII.sub(_escape, piece.decode("utf-8")).encode("utf-8"))
            copied = end
        start = end
    pieces.append(data[copied:])
    return b"".join(pieces)


def _printable_ascii(piece: bytes) -> bool:
    return not piece.translate(None, _PRINTABLE_ASCII)  # a table look-up per byte


def _compact_clean(piece: bytes) -> bool:
    # A word at a time, and memchr: ~50x cheaper than _printable_ascii's table.
    return piece.isascii() and b"\x7f" not in piece


# Non-ASCII characters: the few that could be unprintable are looked at one by one.
# A raw tab, newline or carriage return in JSON is whitespace between tokens (one
# inside a string is always escaped): indented JSON's lines, never escaped, or the
# document would no longer parse.
_NON_ASCII = lazy_compile(r"[^\t\n\r\x20-\x7e]")
# What _NON_ASCII never matches, and the size of the pieces looked at for it.
_PRINTABLE_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n\r"
_PIECE = 1 << 14


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: JSON spells it as a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def lock_json(lock: Lock, verdict: Verdict) -> dict[str, Any]:
    """One lock of the contract as plain JSON values."""
    parsed: dict[str, Any] = orjson.loads(lock_json_bytes(lock, verdict))
    return parsed


def ls_json_bytes(
    generated_at: datetime,
    host: str,
    lock_arrays: Iterable[bytes],
    errors: Sequence[ScanError],
    sources: Sequence[SourceStatus] = (),
    blocking: Sequence[tuple[str, BlockingTree]] = (),
) -> Iterator[bytes | memoryview]:
    """The `lockwatch.ls/1` document as compact UTF-8 JSON in pieces, from JSON
    arrays of lock records (`records_json_array`), joined in the order given, so
    the locks can be rendered anywhere, in any process, and streamed. Each array
    but a lone one is handed on as a view without its brackets: megabytes at
    thousands of locks, never copied here."""
    head = {
        "schema": LS_SCHEMA,
        "generated_at": generated_at,
        "host": host,
        "sources": [{**source.as_json(), "name": text(source.name)} for source in sources],
    }
    tail = {
        "errors": [
            {"path": text(e.path), "code": e.code, "message": text(e.message)} for e in errors
        ],
        "blocking": [{"server": server, **tree.as_json()} for server, tree in blocking],
    }
    start = orjson.dumps(head, option=_OPTIONS)[:-1] + b',"locks":'
    if isinstance(lock_arrays, list):
        filled = [array for array in lock_arrays if len(array) > 2]
        if len(filled) == 1:
            # The one array as it is, brackets and all: megabytes at thousands of
            # locks, not copied again to leave its brackets out.
            yield start
            yield filled[0]
            yield b"," + orjson.dumps(tail, option=_OPTIONS)[1:]
            return
    yield start + b"["
    first = True
    for array in lock_arrays:
        if len(array) > 2:
            if not first:
                yield b","
            yield memoryview(array)[1:-1]
            first = False
    yield b"]," + orjson.dumps(tail, option=_OPTIONS)[1:]


def ls_json(
    generated_at: datetime,
    host: str,
    assessed: Sequence[tuple[Lock, Verdict]],
    errors: Sequence[ScanError],
    sources: Sequence[SourceStatus] = (),
    blocking: Sequence[tuple[str, BlockingTree]] = (),
) -> dict[str, Any]:
    """The whole `lockwatch.ls/1` document as plain JSON values."""
    rendered = records_json_array(
        [lock_record(lock, verdict, generated_at) for lock, verdict in assessed]
    )
    pieces = ls_json_bytes(generated_at, host, [rendered], errors, sources, blocking)
    document: dict[str, Any] = orjson.loads(b"".join(pieces))
    return document
