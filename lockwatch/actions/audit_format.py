"""How the audit log is written down: records, hashes, MACs, the head, the
marker of a torn line. Shared by the writer (audit.py) and `verify`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

GENESIS = "sha256:" + "0" * 64

# Fields of a keyed record: the key's id, and the MAC over everything else.
KEY_ID = "key_id"
MAC = "mac"
# Set on the record written after a line a crash cut short: that line's size and
# sha256, so `verify` can tell it was torn by a crash (and marked) from an edit.
TORN = "torn_before"


def canonical(value: Mapping[str, Any], *leave_out: str) -> bytes:
    body = {key: item for key, item in value.items() if key not in leave_out}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def record_hash(record: Mapping[str, Any]) -> str:
    """sha256 over the record's canonical JSON without its hash and MAC: the chain
    that `prev_hash` follows, and what a syslog anchor names."""
    return "sha256:" + hashlib.sha256(canonical(record, "hash", MAC)).hexdigest()


def mac_body(record: Mapping[str, Any]) -> bytes:
    """What a record's MAC covers: everything but the MAC (its hash included)."""
    return canonical(record, MAC)


def head_mac_body(head: Mapping[str, Any]) -> bytes:
    return b"head:" + canonical(head, MAC)


def serialized(record: Mapping[str, Any]) -> bytes:
    """A record's line, exactly as the log holds it (without the newline)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def torn_marker(raw: bytes) -> dict[str, Any]:
    return {"bytes": len(raw), "sha256": "sha256:" + hashlib.sha256(raw).hexdigest()}


def head_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


def spare_head_path(path: Path) -> Path:
    """The head's twin: the next head is written here, then swapped into place, so
    writing a head never needs a block the disk may not have."""
    return path.with_name(f".{path.name}.head.spare")


def read_records(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, bytes]]:
    """(line number, record or None when the line is not a JSON object, raw line)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.rstrip(b"\n")
            if not line.strip():
                yield number, None, line
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            yield number, record if isinstance(record, dict) else None, line


_HEAD_LIMIT = 64 * 1024


def read_head(path: Path) -> dict[str, Any] | None:
    """The head beside the log at `path`: None when there is none, {} when it
    cannot be read as one (not JSON, not an object, unreadable)."""
    from lockwatch.trusted import read_file

    try:
        # A head is one short line: a FIFO or a device in its place is no head.
        data = json.loads(read_file(head_path(path), _HEAD_LIMIT, None))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
