"""The audit log: append-only JSON Lines, hash-chained, keyed, fsync'd, mode 0600.

Every record carries `prev_hash`, the `hash` of the record before it (the first
record chains to GENESIS), and its own `hash`: sha256 over the record's
canonical JSON without that field (and without its MAC). Editing a record breaks
its own hash; removing or reordering records breaks the chain or the sequence.

The chain alone proves nothing against someone who can write the log: they can
recompute every hash after an edit. So each record also carries `key_id` and
`mac`, an HMAC-SHA256 under a key kept apart from the log (audit_key.py), which
they cannot recompute without reading that key. Logs written before keys stay
readable; `verify` says which of their records are unkeyed.

Removing records from the end leaves a valid chain, so every append also writes
the log's head (last seq and hash, keyed too) beside it, and `verify` checks
the log ends where its head says. The head is written before the log is
created, so a log without a head was tampered with. With an anchor (syslog or
journald: `--audit-syslog`), each record's seq and hash also leave the machine's
disk, where neither the log's writer nor the key's reader can take them back.

Writers take an exclusive flock on the log for the whole append, so two
lockwatch processes acting at once still produce one unbroken chain. An intent
is written only once room for its result is reserved (audit_disk.py); a write
that fails half-way is cut back off, and a line a crash cut short is marked by
the next record, so `verify` tells "torn by a crash" from "edited".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import getpass
import hashlib
import json
import os
import stat
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lockwatch.actions import audit_disk
from lockwatch.actions.audit_format import (
    GENESIS,
    KEY_ID,
    MAC,
    TORN,
    head_mac_body,
    head_path,
    mac_body,
    read_head,
    read_records,
    record_hash,
    serialized,
    spare_head_path,
    torn_marker,
)
from lockwatch.actions.audit_key import (
    AuditKey,
    AuditKeyError,
    default_key_path,
    key_path,
    keyed_since,
    register,
)
from lockwatch.actions.audit_syslog import AnchorUnreachable, SyslogAnchor, syslog_anchor
from lockwatch.actions.audit_verify import Verification, verify
from lockwatch.clock import Clock
from lockwatch.model.timestamps import format_timestamp

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

__all__ = [
    "EVENTS",
    "GENESIS",
    "INTENT",
    "SCHEMA",
    "AuditError",
    "AuditKey",
    "AuditKeyError",
    "AuditLog",
    "Operator",
    "Verification",
    "default_key_path",
    "default_path",
    "head_path",
    "key_path",
    "log_path",
    "new_action_id",
    "read_records",
    "record_hash",
    "syslog_anchor",
    "verify",
]

_TAIL_CHUNK = 64 * 1024
# O_NONBLOCK: a FIFO planted at the log's name is refused, never waited on.
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# Room kept, beyond an intent itself, for what follows it before the action's
# result is written: the result (about the intent's size), a backend_terminated
# record on the way, the head; and a margin for messages and a new lock's bytes.
_RESULTS_PER_INTENT = 3
_RESULT_MARGIN = 16 * 1024
# A head is one short line; its spare is made this big so rewriting it never grows it.
_HEAD_SIZE = 512

Anchor = Callable[[str], None]


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


def anchor_line(path: Path, record: Mapping[str, Any]) -> str:
    """What an anchor keeps of a record: enough to check the log against later
    (`lockwatch audit verify --anchors`), nothing an operator typed."""
    return (
        f"seq={record.get('seq')} hash={record.get('hash')} event={record.get('event')}"
        f" log={os.path.realpath(path)}"
    )


@dataclass(frozen=True, slots=True)
class _Tail:
    """Where the log ends, as the next record needs it."""

    seq: int
    prev_hash: str
    end: int
    # The last line has no newline: it must be ended before the next record.
    unended: bool = False
    # That line is not a whole record (a crash cut it short): its marker.
    torn: dict[str, Any] | None = None
    # The record chained to carries a MAC.
    keyed: bool = False
    # The last line is no record lockwatch wrote (edited): chained to as bytes.
    damaged: bool = False


class AuditLog:
    """Appends records for one operator on one host.

    `key_path`: the HMAC key (default: the user config directory's audit.key,
    made on first use). `anchor`: called with each record's anchor line once it
    is written (`syslog_anchor()` for --audit-syslog)."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Clock,
        host: str,
        operator: Operator,
        key_path: Path | None = None,
        anchor: Anchor | None = None,
    ) -> None:
        self.path = path
        self.clock = clock
        self.host = host
        self.operator = operator
        self.key_path = key_path if key_path is not None else default_key_path()
        self.anchor = anchor
        self._key: AuditKey | None = None

    def key(self) -> AuditKey:
        if self._key is None:
            try:
                self._key = AuditKey.load_or_create(self.key_path)
            except AuditKeyError as exc:
                raise AuditError(f"{exc}; the audit log cannot be keyed") from exc
        return self._key

    def append(self, event: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Write one record and fsync it; AuditError if that is not possible.

        An intent is written only if room for what follows it (its result) can
        be reserved first: on a full disk it is refused with nothing written, so
        no action starts that could not be audited to its end."""
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
        required = isinstance(self.anchor, SyslogAnchor) and self.anchor.required
        if required and event == INTENT:
            assert isinstance(self.anchor, SyslogAnchor)
            why = self.anchor.check()
            if why is not None:
                raise AuditError(
                    f"--audit-syslog: syslog cannot be reached ({why}), and this action's"
                    " records must reach it (--audit-syslog=best-effort acts without it)"
                )
        self._check_place()
        key = self.key()
        try:
            fd = self._open(key)
        except AuditError:
            raise
        except OSError as exc:
            raise AuditError(f"cannot open the audit log {self.path}: {_why(exc)}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            tail = _tail(fd)
            problem = self._removed(tail, key)
            if problem is not None:
                raise AuditError(
                    f"the audit log {self.path} {problem}: lockwatch will not write after"
                    " that evidence, so nothing was done (`lockwatch audit verify` says"
                    f" more; move the log and {head_path(self.path).name} aside to start"
                    " a new log)"
                )
            record["seq"] = tail.seq + 1
            record["prev_hash"] = tail.prev_hash
            if tail.torn is not None:
                record[TORN] = tail.torn
            record[KEY_ID] = key.id
            record["hash"] = record_hash(record)
            record[MAC] = key.mac(mac_body(record))
            line = serialized(record) + b"\n"
            if tail.unended:
                # A writer died mid-line: end that line, so this record stands on its own.
                line = b"\n" + line
            if event == INTENT:
                self._reserve(fd, tail.end, len(line))
            _append(fd, line, tail.end)
            if not tail.keyed:
                # The first keyed record of this log: the key's directory remembers.
                register(key, self.path, record["seq"])
            self._write_head(record["seq"], record["hash"], key)
        except audit_disk.NoRoom as exc:
            raise AuditError(
                f"no room to audit in {self.path.parent} ({exc.strerror}); nothing was written"
            ) from exc
        except OSError as exc:
            raise AuditError(f"cannot write the audit log {self.path}: {_why(exc)}") from exc
        finally:
            os.close(fd)  # also drops the flock
        if self.anchor is not None:
            self._witness(record, fields, required=required)
        return record

    def _witness(
        self, record: dict[str, Any], fields: Mapping[str, Any], *, required: bool
    ) -> None:
        """Send the written record's anchor line. After the record: syslog is a second
        witness, never in the way of the first. An intent it missed, when it was
        required, stops the action (its refusal written as the intent's result)."""
        assert self.anchor is not None
        try:
            self.anchor(anchor_line(self.path, record))
        except AnchorUnreachable as exc:
            if required and record["event"] == INTENT:
                why = f"--audit-syslog: syslog cannot be reached ({exc})"
                self._refuse_intent(fields, why)
                raise AuditError(why) from exc
            if required:
                assert isinstance(self.anchor, SyslogAnchor)
                self.anchor.missed_after_all(exc)
        except Exception:  # noqa: BLE001 - a witness that fails takes nothing back
            pass

    def _refuse_intent(self, fields: Mapping[str, Any], why: str) -> None:
        """The intent is in the log, but its action will not go ahead (syslog stalled
        after check() said it could take it): its result says so, so the log never
        holds an intent left pending for an action that was never tried."""
        result = {key: value for key, value in fields.items() if key != "intent"}
        result.update(result="refused", code="audit_unwritable", message=f"{why}; nothing done")
        with contextlib.suppress(AuditError):
            self.append("action_refused", result)

    def _check_place(self) -> None:
        """AuditError when someone besides you or root could replace the log:
        its directory (or one above) writable by others without the sticky bit,
        or owned by another user; or the log itself theirs."""
        from lockwatch.trusted import SETTINGS, dir_problem, own_file_problem, who

        why = dir_problem(str(self.path), os.geteuid(), SETTINGS)
        if why is None:
            try:
                owner = os.lstat(self.path).st_uid
            except OSError:
                owner = os.geteuid()  # none yet (or unreadable: opening it says why)
            if owner not in (os.geteuid(), 0):
                why = f"it is owned by {who(owner)}, who can rewrite it"
        for beside in (head_path(self.path), spare_head_path(self.path)):
            # In a sticky directory (/tmp) anyone may make these names first: a head
            # or spare of theirs would be root's head, theirs to delete or to hang on.
            problem = own_file_problem(beside) if why is None else None
            if problem is not None:
                why = f"{beside} beside it is {problem}"
        if why is not None:
            raise AuditError(f"the audit log {self.path} is refused: {why}")

    def _removed(self, tail: _Tail, key: AuditKey) -> str | None:
        """What says records were taken from this log, if anything: appending after
        it would bury the evidence (the new head would vouch for the shortened log).
        Under the log's lock a head is never ahead of the last record, nor missing:
        lockwatch writes it before the log's first record and after each one."""
        head = read_head(self.path)
        name = head_path(self.path).name
        if head is None:
            if tail.end == 0 and keyed_since(key, self.path) is None:
                return None  # an empty file made beforehand: nothing was ever written
            return f"has no head ({name} was removed)" + (
                ", and it is empty: it was emptied" if tail.end == 0 else ""
            )
        seq, last = head.get("seq"), head.get("hash")
        if type(seq) is not int or seq < 0 or not isinstance(last, str):
            return f"has a damaged head ({name} is not a head lockwatch writes)"
        if KEY_ID in head or MAC in head:
            if head.get(KEY_ID) == key.id and not key.check(head_mac_body(head), head.get(MAC)):
                return f"has a head edited without the key ({name}: its MAC does not match)"
        elif tail.keyed:
            return f"has a head without a MAC after keyed records ({name} was rewritten)"
        if tail.damaged:
            return None  # the edited line stays in the log, where verify names it
        if seq > tail.seq:
            return (
                f"ends at record {tail.seq}, but its head says it goes on to {seq}:"
                " records were removed from its end"
            )
        if seq == tail.seq and last != tail.prev_hash:
            return f"ends in a record other than the one its head names (record {seq})"
        return None

    def _reserve(self, fd: int, end: int, size: int) -> None:
        """Room for the intent of `size` bytes and all that follows it, or NoRoom."""
        needed = size * (1 + _RESULTS_PER_INTENT) + _RESULT_MARGIN
        audit_disk.reserve(fd, end, needed)
        try:
            audit_disk.make_spare(spare_head_path(self.path), _HEAD_SIZE)
        except OSError as exc:
            # Refused: the room reserved past the log's end goes back to the disk.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, end)
            if exc.errno in audit_disk.NO_ROOM:
                raise audit_disk.NoRoom(exc.errno, "no room for the head's spare") from exc
            raise

    def _write_head(self, seq: int, last_hash: str, key: AuditKey) -> None:
        head: dict[str, Any] = {"seq": seq, "hash": last_hash, KEY_ID: key.id}
        head[MAC] = key.mac(head_mac_body(head))
        data = json.dumps(head).encode() + b"\n"
        # The record is written and synced: a head left behind it is what `verify`
        # reports as an interrupted append, not as an edit.
        with contextlib.suppress(OSError):
            audit_disk.write_beside(head_path(self.path), spare_head_path(self.path), data)

    def _open(self, key: AuditKey) -> int:
        parent = self.path.parent
        if not parent.is_dir():
            # Another lockwatch may be making it this very moment: made, or there.
            try:
                parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except FileExistsError:
                raise NotADirectoryError(errno.ENOTDIR, f"{parent} is not a directory") from None
        created = not os.path.lexists(self.path)
        if created:
            with _locked_dir(parent):  # two lockwatch processes making the log at once
                if not os.path.lexists(self.path):
                    self._start_head(key)
        fd = os.open(self.path, _OPEN_FLAGS, 0o600)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid not in (os.geteuid(), 0):
                # Swapped since _check_place looked: never a FIFO, never another's.
                raise AuditError(f"the audit log {self.path} is refused: not your regular file")
            if st.st_mode & 0o077 and st.st_uid == os.geteuid():
                os.fchmod(fd, 0o600)  # an audit log is nobody else's business
            if created:
                audit_disk.fsync_dir(parent)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _start_head(self, key: AuditKey) -> None:
        """A new log gets its head first (record 0), so that a log without a head
        can only mean the head was removed. A head already there that names
        records means the log they were in was removed: no new log over it."""
        head = read_head(self.path)
        if head is not None:
            seq = head.get("seq")
            if isinstance(seq, int) and seq > 0:
                raise AuditError(
                    f"the audit log {self.path} is gone, but its head says {seq} records were"
                    " written: it was removed; lockwatch will not start a new log over that"
                    f" evidence (move {head_path(self.path).name} aside to start afresh)"
                )
            return
        start: dict[str, Any] = {"seq": 0, "hash": GENESIS, KEY_ID: key.id}
        start[MAC] = key.mac(head_mac_body(start))
        audit_disk.write_beside(
            head_path(self.path),
            spare_head_path(self.path),
            json.dumps(start).encode() + b"\n",
        )


@contextlib.contextmanager
def _locked_dir(directory: Path) -> Iterator[None]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a symlink; lockwatch never writes its audit log through one"
    if exc.errno in audit_disk.NO_ROOM:
        return f"{exc.strerror} (the disk is full)"
    return exc.strerror or str(exc)


def _append(fd: int, line: bytes, end: int) -> None:
    """Write `line` at the end and sync it; on failure (a full disk, an I/O error)
    cut the log back to where it ended, so no half record is left behind."""
    try:
        audit_disk.write_all(fd, line)
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, end)
            os.fsync(fd)
        raise


def _tail(fd: int) -> _Tail:
    """The last whole record's seq and hash (what the next record chains to), and
    whether the log ends in a line a crash cut short."""
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0:
        return _Tail(0, GENESIS, 0)
    if os.pread(fd, 1, end - 1) == b"\n":
        return _chained(_line_before(fd, end - 1), end)
    last = _line_before(fd, end)
    record = _parsed(last)
    if record is not None and record.get("hash") == record_hash(record):
        # Written whole but for its newline: a record like any other.
        return _chained(last, end, unended=True)
    # Cut short: the next record marks it and chains to the record before it.
    before = end - len(last) - 1
    previous = _line_before(fd, before) if before > 0 else None
    chained = _chained(previous, end) if previous is not None else _Tail(0, GENESIS, end)
    return _Tail(
        chained.seq,
        chained.prev_hash,
        end,
        unended=True,
        torn=torn_marker(last),
        keyed=chained.keyed,
        damaged=chained.damaged,
    )


def _chained(line: bytes | None, end: int, *, unended: bool = False) -> _Tail:
    if not line:
        return _Tail(0, GENESIS, end, unended=unended)
    record = _parsed(line)
    try:
        assert record is not None
        return _Tail(
            int(record["seq"]), str(record["hash"]), end, unended=unended, keyed=KEY_ID in record
        )
    except (AssertionError, ValueError, KeyError, TypeError):
        # A damaged line: chain to its bytes, so verify still points at it.
        digest = "sha256:" + hashlib.sha256(line).hexdigest()
        return _Tail(0, digest, end, unended=unended, damaged=True)


def _parsed(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _line_before(fd: int, position: int) -> bytes:
    """The line that ends at byte `position` (its newline, or the end of the file)."""
    buffer = b""
    start = position
    while start > 0:
        step = min(_TAIL_CHUNK, start)
        start -= step
        buffer = os.pread(fd, step, start) + buffer
        cut = buffer.rfind(b"\n")
        if cut >= 0:
            return buffer[cut + 1 :]
    return buffer
