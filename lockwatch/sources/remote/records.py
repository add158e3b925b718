"""A remote's lock records checked against the lockwatch.ls/1 contract
(docs/json.md), and its text made fit to show.

Another host's serve is untrusted input like any lock file. A record is taken
only if every field the contract names has its type and range: ids and names as
text, a holder as an object, pids as pids, ages and TTLs as seconds (not
negative, not 1e308), dates as dates. Beyond the named fields the contract's own
naming holds for every field a source adds: `*_seconds` is a duration, `*_at` a
date. A record that breaks it is dropped and counted, with one line saying why
(its values cut), never passed on to a merged `ls --json`.

Text from a remote is cut where it is shown in one line (`cut`: the start, and
the length it had), and the JSON passed on escapes what could drive a terminal
(`json_array`): the same strings to a JSON reader, no raw control to a screen.

Pure: values in, values out.
"""

from __future__ import annotations

import math
from typing import Any

from lockwatch.model.report import records_json_array
from lockwatch.model.text import cut as cut  # re-exported: the remote source's own name
from lockwatch.model.timestamps import parse_timestamp
from lockwatch.model.verdict import State

STATES = frozenset(state.value for state in State)
# A century: an age or a TTL beyond it is no age (1e308 is finite, and a float).
MAX_SECONDS = 100 * 365.25 * 86400
# pid_t is 32 bits wherever a serve runs.
MAX_PID = 2**31 - 1
# An id is a path with a prefix (PATH_MAX is 4096) or a server's lock: longer is
# not an id, and as a TARGET it would be cut.
MAX_ID = 8192
# A short word of the contract (source, format, a reason's code).
MAX_WORD = 256
# Nesting a record may have beyond its own fields (a holder's process, a quorum's
# members): deeper is not a lock record, and is not walked.
MAX_DEPTH = 8

_HOLDER_TEXT = ("host", "actor", "session", "operation")
_DATES = ("acquired_at", "heartbeat_at", "expires_at", "next_change_at")
_SECONDS = ("age_seconds", "ttl_seconds")


class RecordError(ValueError):
    """A record that does not keep the contract; the message says where, briefly."""


def shown(value: Any) -> str:
    """Any JSON value in a line of an error: text cut, numbers in short."""
    if isinstance(value, str):
        return repr(cut(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**12:
        return f"{float(value):.6g}"
    if isinstance(value, dict | list):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    return repr(value)


def check_record(record: Any) -> dict[str, Any]:
    """`record`, if it keeps the contract (raises RecordError)."""
    if not isinstance(record, dict):
        raise RecordError(f"a lock is a JSON object, not {shown(record)}")
    _text(record, "id", limit=MAX_ID)
    _text(record, "source", limit=MAX_WORD)
    _text(record, "format", limit=MAX_WORD)
    _text(record, "name", empty=True)
    if record.get("state") not in STATES:
        raise RecordError(f"state {shown(record.get('state'))} is none of the contract's")
    _optional_text(record, "path")
    _optional_text(record, "sha256", limit=MAX_WORD)
    _optional_text(record, "host", limit=MAX_WORD)
    reasons = record.get("reasons", [])
    if not isinstance(reasons, list):
        raise RecordError(f"reasons is {shown(reasons)}, not a list")
    for reason in reasons:
        if not isinstance(reason, dict):
            raise RecordError(f"a reason is {shown(reason)}, not an object")
        _text(reason, "code", limit=MAX_WORD)
        _text(reason, "message", empty=True)
    holder = record.get("holder")
    if not isinstance(holder, dict):
        raise RecordError(f"holder is {shown(holder)}, not an object")
    pid = holder.get("pid")
    if pid is not None and not (_is_int(pid) and 0 <= pid <= MAX_PID):
        raise RecordError(f"holder.pid {shown(pid)} is not a pid")
    for key in _HOLDER_TEXT:
        _optional_text(holder, key, prefix="holder.")
    if holder.get("alive") not in (None, True, False):
        raise RecordError(f"holder.alive is {shown(holder.get('alive'))}, not true/false/null")
    for key in ("scope", "conflicts_with"):
        paths = record.get(key, [])
        if not isinstance(paths, list) or not all(isinstance(path, str) for path in paths):
            raise RecordError(f"{key} is not a list of text")
    blocking = record.get("blocking", [])
    if not isinstance(blocking, list):
        raise RecordError(f"blocking is {shown(blocking)}, not a list")
    for key in _DATES:
        _date(record.get(key), key)
    for key in _SECONDS:
        _duration(record.get(key), key)
    # The contract's naming, for every field a source adds (and those above again).
    _named(record, "", 0)
    return record


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(
    where: dict[str, Any], key: str, *, limit: int | None = None, empty: bool = False
) -> None:
    value = where.get(key)
    if not isinstance(value, str) or (not value and not empty):
        raise RecordError(f"{key} is {shown(value)}, not text")
    if limit is not None and len(value) > limit:
        raise RecordError(f"{key} {shown(value)} is over {limit:,} chars")


def _optional_text(
    where: dict[str, Any], key: str, *, limit: int | None = None, prefix: str = ""
) -> None:
    value = where.get(key)
    if value is None:
        return
    if not isinstance(value, str):
        raise RecordError(f"{prefix}{key} is {shown(value)}, not text or null")
    if limit is not None and len(value) > limit:
        raise RecordError(f"{prefix}{key} {shown(value)} is over {limit:,} chars")


def _date(value: Any, key: str) -> None:
    if value is None:
        return
    if not isinstance(value, str) or parse_timestamp(value) is None:
        raise RecordError(f"{key} {shown(value)} is not a date")


def _duration(value: Any, key: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(f"{key} {shown(value)} is not a number of seconds")
    if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
        raise RecordError(f"{key} {shown(value)} is out of range (0 to a century)")


def _named(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise RecordError(f"{path or 'the record'} is nested too deeply")
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}{key}"
            if key.endswith("_seconds"):
                _duration(item, where)
            elif key.endswith("_at"):
                _date(item, where)
            elif isinstance(item, dict | list):
                _named(item, where + ".", depth + 1)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list):
                _named(item, path, depth + 1)


def json_array(records: list[dict[str, Any]]) -> bytes:
    """Records as a JSON array, every character a terminal would act on or hide
    escaped (`records_json_array` does it for every JSON lock array)."""
    return records_json_array(records)
