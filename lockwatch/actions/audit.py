"""The audit log: append-only JSON Lines, hash-chained, fsync'd, mode 0600.

Every record carries `prev_hash`, the `hash` of the record before it (the first
record chains to GENESIS), and its own `hash`: sha256 over the record's
canonical JSON without that field. Editing a record breaks its own hash;
removing or reordering records breaks the chain or the sequence. Removing
records from the end leaves a valid chain, so every append also writes the
log's head (last seq and hash) beside it, and `verify` checks the log ends
where its head says.

Writers take an exclusive flock on the log for the whole append, so two
lockwatch processes acting at once still produce one unbroken chain.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import hashlib
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lockwatch.clock import Clock
from lockwatch.model.timestamps import format_timestamp

GENESIS = "sha256:" + "0" * 64
SCHEMA = "lockwatch.audit/1"

# Results of an action, as the audit log and the CLI name them.
EVENTS = (
    "lock_broken",
    "lock_stolen",
    "lock_released",
    "backend_terminated",
    "backend_cancelled",
    "action_refused",
    "action_failed",
)
# Written before anything is touched; its `intent` names the event hoped for.
INTENT = "action_intent"

_TAIL_CHUNK = 64 * 1024
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class AuditError(Exception):
    """The audit log cannot be written: no action may go ahead."""


def default_path() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("lockwatch")) / "audit.jsonl"


def log_path(given: Path | None, configured: str | None) -> Path:
    """The audit log in force: `--audit-log`, else the config's `actions.audit_log`,
    else the user state directory's."""
    if given is not None:
        return given
    return Path(configured) if configured else default_path()


def head_path(path: Path) -> Path:
    return path.with_name(path.name + ".head")


@dataclass(frozen=True, slots=True)
class Operator:
    """Who acts: `--operator` if given, else the user behind sudo, else the OS user."""

    name: str
    os_user: str
    sudo_user: str | None

    @staticmethod
    def identify(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Operator:
        env = os.environ if environ is None else environ
        try:
            os_user = getpass.getuser()
        except (KeyError, OSError):  # no passwd entry (containers): the uid still says who
            os_user = str(os.getuid())
        sudo_user = env.get("SUDO_USER") or None
        name = (explicit or "").strip() or sudo_user or os_user
        return Operator(name=name, os_user=os_user, sudo_user=sudo_user)


def record_hash(record: Mapping[str, Any]) -> str:
    body = {key: value for key, value in record.items() if key != "hash"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _text(value: str) -> str:
    """`value` as UTF-8 can carry it: a path or argument that is not UTF-8 (Python
    holds its bytes as lone surrogates) is written with `\\xff` escapes, as the
    CLI prints it, instead of making the record unwritable."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, Mapping):
        return {_text(str(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value


def new_action_id() -> str:
    return uuid.uuid4().hex


class AuditLog:
    """Appends records for one operator on one host."""

    def __init__(self, path: Path, *, clock: Clock, host: str, operator: Operator) -> None:
        self.path = path
        self.clock = clock
        self.host = host
        self.operator = operator

    def append(self, event: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Write one record and fsync it; AuditError if that is not possible."""
        record: dict[str, Any] = {
            "seq": 0,
            "time": format_timestamp(self.clock.now()),
            "event": event,
            "operator": self.operator.name,
            "os_user": self.operator.os_user,
            "sudo_user": self.operator.sudo_user,
            "host": self.host,
            "lockwatch_pid": os.getpid(),
        }
        record.update(fields)
        record = _jsonable(record)
        try:
            fd = self._open()
        except OSError as exc:
            raise AuditError(f"cannot open the audit log {self.path}: {_why(exc)}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            seq, prev = _last(fd)
            record["seq"] = seq + 1
            record["prev_hash"] = prev
            record["hash"] = record_hash(record)
            line = _serialized(record) + b"\n"
            if _cut_short(fd):
                # A writer died mid-line: end that line, so this record stands on its own.
                line = b"\n" + line
            _write_all(fd, line)
            os.fsync(fd)
            _write_head(self.path, record["seq"], record["hash"])
        except OSError as exc:
            raise AuditError(f"cannot write the audit log {self.path}: {_why(exc)}") from exc
        finally:
            os.close(fd)  # also drops the flock
        return record

    def _open(self) -> int:
        parent = self.path.parent
        if not parent.is_dir():
            if parent.exists():
                raise NotADirectoryError(errno.ENOTDIR, f"{parent} is not a directory")
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        try:
            st = os.fstat(fd)
            if st.st_mode & 0o077 and st.st_uid == os.geteuid():
                os.fchmod(fd, 0o600)  # an audit log is nobody else's business
            if created:
                _fsync_dir(parent)
        except OSError:
            os.close(fd)
            raise
        return fd


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a symlink; lockwatch never writes its audit log through one"
    return exc.strerror or str(exc)


def _serialized(record: Mapping[str, Any]) -> bytes:
    """A record's line, exactly as the log holds it (without the newline)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _cut_short(fd: int) -> bool:
    """Whether the log's last line has no newline (a write cut short)."""
    end = os.lseek(fd, 0, os.SEEK_END)
    return end > 0 and os.pread(fd, 1, end - 1) != b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _last(fd: int) -> tuple[int, str]:
    """The last record's seq and hash: what the next record chains to."""
    line = _last_line(fd)
    if line is None:
        return 0, GENESIS
    try:
        record = json.loads(line)
        return int(record["seq"]), str(record["hash"])
    except (ValueError, KeyError, TypeError):
        # A damaged last line: chain to its bytes, so verify still points at it.
        return 0, "sha256:" + hashlib.sha256(line).hexdigest()


def _last_line(fd: int) -> bytes | None:
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0:
        return None
    buffer = b""
    position = end
    while position > 0:
        step = min(_TAIL_CHUNK, position)
        position -= step
        buffer = os.pread(fd, step, position) + buffer
        stripped = buffer.rstrip(b"\n")
        cut = stripped.rfind(b"\n")
        if cut >= 0:
            return stripped[cut + 1 :]
    stripped = buffer.rstrip(b"\n")
    return stripped or None


def _write_head(path: Path, seq: int, last_hash: str) -> None:
    head = head_path(path)
    temp = head.with_name(f".{head.name}.{os.getpid()}.tmp")
    data = json.dumps({"seq": seq, "hash": last_hash}).encode() + b"\n"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, head)
    _fsync_dir(head.parent)  # the head must survive a crash as surely as the record


# -- reading and verifying -------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    records: int
    # The first bad record's line number and what is wrong with it.
    line: int | None = None
    seq: int | None = None
    problem: str | None = None


def verify(path: Path) -> Verification:
    """Check every record's hash, the chain, the sequence, and the head. A shared
    lock on the log waits out any append in progress (its record written, its head
    not yet), which would otherwise look like tampering."""
    with open(path, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        return _verify(path)


def _verify(path: Path) -> Verification:
    expected_prev = GENESIS
    expected_seq = 1
    count = 0
    last_line = 0
    for number, record, raw in read_records(path):
        last_line = number
        if record is None:
            return Verification(False, count, number, None, "not a JSON record (edited or damaged)")
        seq = record.get("seq")
        if record.get("hash") != record_hash(record):
            return Verification(
                False, count, number, _int(seq), "edited: its hash does not match its content"
            )
        if raw != _serialized(record):
            # Same content, other bytes (spacing, escapes, duplicate keys): not as written.
            return Verification(
                False, count, number, _int(seq), "edited: not byte for byte as lockwatch wrote it"
            )
        if not isinstance(seq, int) or isinstance(seq, bool):
            return Verification(False, count, number, None, "has no sequence number")
        if seq != expected_seq or record.get("prev_hash") != expected_prev:
            if seq < expected_seq:
                problem = f"out of order: record {seq} comes after record {expected_seq - 1}"
            elif seq > expected_seq:
                missing = (
                    f"record {expected_seq}"
                    if seq == expected_seq + 1
                    else f"records {expected_seq}-{seq - 1}"
                )
                problem = (
                    f"{missing} removed or moved: record {seq} follows record {expected_seq - 1}"
                )
            else:
                problem = "the chain is broken: prev_hash does not match the record before it"
            return Verification(False, count, number, seq, problem)
        expected_prev = record["hash"]
        expected_seq = seq + 1
        count += 1
    if count and not _ends_with_newline(path):
        return Verification(
            False,
            count - 1,
            last_line,
            expected_seq - 1,
            "edited or cut short: the last record does not end its line",
        )
    head = _read_head(path)
    last_seq = expected_seq - 1
    if head is None:
        if count:
            return Verification(
                False,
                count,
                None,
                None,
                f"its head file {head_path(path).name} is missing, so removals from the end"
                " cannot be ruled out",
            )
        return Verification(True, 0)
    head_seq, head_hash = head
    if head_seq != last_seq or (count and head_hash != expected_prev):
        if head_seq > last_seq:
            gone = (
                f"record {last_seq + 1}"
                if head_seq == last_seq + 1
                else (f"records {last_seq + 1}-{head_seq}")
            )
            problem = f"{gone} removed from the end: the log stops at record {last_seq}"
        else:
            problem = f"the head says record {head_seq} is last, the log ends at {last_seq}"
        return Verification(False, count, None, last_seq + 1, problem)
    return Verification(True, count)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return True
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_head(path: Path) -> tuple[int, str] | None:
    with contextlib.suppress(FileNotFoundError):
        try:
            data = json.loads(head_path(path).read_bytes())
            return int(data["seq"]), str(data["hash"])
        except (ValueError, KeyError, TypeError):
            return (-1, "")  # a damaged head never matches
    return None
