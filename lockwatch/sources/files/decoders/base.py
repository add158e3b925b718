"""What every decoder shares: the file it was handed and typed field access."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import field
from datetime import UTC, datetime
from types import FunctionType
from typing import Any, Protocol, cast

import orjson

from lockwatch.model.lock import NO_HOLDER, Holder, Lock, Reason
from lockwatch.model.slots import fast_init, lean_dataclass
from lockwatch.model.timestamps import parse_timestamp
from lockwatch.sources.filelocks import FileKey, KernelEvidence
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.ids import file_id
from lockwatch.sources.files.policy import StalenessPolicy

# Largest pid any supported OS hands out (Windows pids are 32-bit).
MAX_PID = 2**32 - 1
# Integers a float holds exactly: seconds and counts beyond this are nonsense, and
# converting bigger ones to float would overflow.
MAX_INTEGER = 2**53
_SHARED_CHARS = 40


# What the kernel says of the file with this key, known before decoding it (see
# LockFile.evidence); None: not known, attaching decides.
KnownEvidence = Callable[[FileKey], KernelEvidence | None]


@fast_init
@lean_dataclass(frozen=True, slots=True)
class LockFile:
    """A lock file's bytes as read, with the facts the filesystem gave about it."""

    path: str  # absolute
    raw: bytes
    mtime: float  # seconds since the epoch, as stat gives it
    sha256: str | None
    # Its device and inode, when it was read: how kernel locks on it are found.
    key: FileKey | None = None
    # What the entry is: a regular "file", a "symlink" (never followed: `target`
    # is its readlink text) or a lock "dir" (mkdir idioms: `entries` are the
    # names inside it, sorted, bounded).
    kind: str = "file"
    target: str | None = None
    entries: tuple[str, ...] = ()
    nlink: int = 1  # hard links: flufl.lock's held lock file has two
    # Other names of this very file in its directory (only looked up when nlink
    # > 1): LinkLockFile's and flufl.lock's claim files name the holder.
    links: tuple[str, ...] = ()
    # For `x.lock` (a file or directory): whether `x` exists beside it (npm's
    # proper-lockfile locks an existing file); None when not looked up.
    unlocked_exists: bool | None = None
    # What the kernel says of it, where a scan knew before decoding (a local file
    # /proc/locks does not name: nothing): its lock is then built with it once,
    # not built and built again to attach it. Attaching still has the last word.
    evidence: KernelEvidence | None = None
    # The entry's own name, cut from `path` once: every format asks for it (a
    # scan asks some twenty formats about each file).
    name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _set_name(self, self.path.rpartition("/")[2])

    @property
    def modified_at(self) -> datetime:
        return datetime.fromtimestamp(self.mtime, tz=UTC)

    def parents(self, depth: int) -> tuple[str, ...]:
        """Names of the `depth` nearest directories, nearest first ("" above the root)."""
        parts = self.path.rsplit("/", depth + 1)
        names = parts[-2:0:-1] if len(parts) == depth + 2 else parts[-2::-1]
        return (*names, *("",) * (depth - len(names)))

    def stem(self) -> str:
        """The file name without `.lock`/`.pid`; for a bare `.lock`, its directory's name."""
        name = self.name
        for suffix in (".lock", ".pid"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        return name or self.parents(1)[0] or self.name


# `name`'s slot set through its own descriptor, fetched once: `object.__setattr__`
# looks the name up and makes a bound wrapper each call (~900 instructions more, and
# every file a scan reads is a LockFile).
_set_name: Callable[[LockFile, str], None] = LockFile.__dict__["name"].__set__


@lean_dataclass(frozen=True, slots=True)
class Claims:
    """Which entries a tool's format (NATIVE) can claim at all, declared in its
    module as `CLAIMS`: a scan offers an entry only to the formats whose claims
    it meets (one table, built once, decoders.dispatch), not to all twenty.
    A superset of what `read` takes: `read` still decides. An entry of one of
    `kinds` is offered when its name is one of `names`, ends with one of
    `suffixes` or starts with one of `prefixes`, when a file's first byte is
    one of `leading`, or always (`anything`: its content or place decides)."""

    kinds: tuple[str, ...] = ("file",)
    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    leading: bytes = b""
    anything: bool = False


# Claims.leading for text that `str.strip()` may start with: the first byte of
# the UTF-8 of each whitespace character (tests/decoders/test_dispatch.py
# derives it from str.isspace(); written out, import does not scan Unicode).
STRIPPED_LEADS = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \xc2\xe1\xe2\xe3"
DIGITS = b"0123456789"


def shown(value: object, limit: int = 40) -> str:
    """A short repr for messages; containers by type only, since a deeply nested
    value that JSON just managed to parse can exhaust the stack in repr()."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def schema_violation(message: str) -> Reason:
    return Reason("schema_violation", message)


class Fields:
    """Reads typed fields from a JSON object, collecting every problem as a defect."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc
        self.defects: list[Reason] = []

    def _get(self, key: str, required: bool, kind: str) -> Any:
        value = self.doc.get(key)
        if value is None and required:
            self.defects.append(schema_violation(f"required field {key!r} ({kind}) is missing"))
        return value

    def _wrong(self, key: str, kind: str) -> None:
        got = shown(self.doc[key])
        self.defects.append(schema_violation(f"field {key!r} must be {kind}, got {got}"))

    def text(self, key: str, *, required: bool = True, allow_int: bool = False) -> str | None:
        # `_get`, inlined: a scan reads a few texts of every lock file.
        value = self.doc.get(key)
        if value is None:
            if required:
                self.defects.append(schema_violation(f"required field {key!r} (string) is missing"))
            return None
        if type(value) is str:
            if not required or (value and not value.isspace()):
                # Short texts repeat across a tree's locks (a host, a user, a
                # session name): one object each, shared by every lock of a scan's
                # chunk (pickling keeps one copy of an object it meets again).
                return sys.intern(value) if len(value) <= _SHARED_CHARS else value
        elif allow_int and type(value) is int:
            return str(value)
        self._wrong(key, "a non-empty string")
        return None

    def integer(
        self,
        key: str,
        *,
        required: bool = True,
        minimum: int | None = None,
        maximum: int = MAX_INTEGER,
    ) -> int | None:
        # `_get`, inlined (as in `text`): a scan reads a pid or a count of most lock files.
        value = self.doc.get(key)
        if value is None:
            if required:
                message = f"required field {key!r} (integer) is missing"
                self.defects.append(schema_violation(message))
            return None
        # bool is an int in Python but never a valid count or pid in a lock file.
        if type(value) is not int or value > maximum or (minimum is not None and value < minimum):
            low = "" if minimum is None else f" >= {minimum}"
            self._wrong(key, f"an integer{low} and <= {maximum}")
            return None
        return value

    def pid(self, key: str = "pid", *, required: bool = True) -> int | None:
        value = self.integer(key, required=required, minimum=1)
        if value is not None and value > MAX_PID:
            self._wrong(key, "a process id")
            return None
        return value

    def timestamp(self, key: str, *, required: bool = True) -> datetime | None:
        # `_get`, inlined (as in `text`): a scan reads a time or two of most lock files.
        value = self.doc.get(key)
        if value is None:
            if required:
                message = f"required field {key!r} (ISO-8601 timestamp) is missing"
                self.defects.append(schema_violation(message))
            return None
        parsed = parse_timestamp(value) if isinstance(value, str) else None
        if parsed is None:
            self._wrong(key, "an ISO-8601 timestamp")
        return parsed

    def string_list(self, key: str, *, required: bool = True) -> list[str] | None:
        value = self._get(key, required, "list of strings")
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self._wrong(key, "a list of non-empty strings")
            return None
        return value


def file_lock(
    file: LockFile,
    *,
    format: str,
    policy: StalenessPolicy,
    content: Any,
    name: str | None = None,  # None: the file's stem
    holder: Holder | None = None,
    acquired_at: datetime | None = None,
    heartbeat_at: datetime | None = None,
    ttl_seconds: float | None = None,
    expires_at: datetime | None = None,
    scope: tuple[str, ...] = (),
    defects: tuple[Reason, ...] | list[Reason] = (),
    notes: tuple[Reason, ...] | list[Reason] = (),
    unread: Reason | None = None,
) -> Lock:
    # Positional, in Lock's field order: every lock file of a scan is made here,
    # and sixteen keywords cost more to match to their names than to pass.
    return Lock(
        file_id(file.path),
        "file",
        format,
        file.stem() if name is None else name,
        file.path,
        holder or NO_HOLDER,
        acquired_at,
        heartbeat_at,
        ttl_seconds,
        expires_at,
        scope,
        content,
        file.sha256,
        tuple(defects),
        tuple(notes),
        FileFacts(policy, file.key, file.kind, file.evidence, None, None, None, None, unread),
    )


class FileLockOf(Protocol):
    """`file_lock` with its format and policy given (`file_lock_for`)."""

    def __call__(
        self,
        file: LockFile,
        *,
        content: Any,
        name: str | None = None,
        holder: Holder | None = None,
        acquired_at: datetime | None = None,
        heartbeat_at: datetime | None = None,
        ttl_seconds: float | None = None,
        expires_at: datetime | None = None,
        scope: tuple[str, ...] = (),
        defects: tuple[Reason, ...] | list[Reason] = (),
        notes: tuple[Reason, ...] | list[Reason] = (),
        unread: Reason | None = None,
        format: str = ...,
        policy: StalenessPolicy = ...,
    ) -> Lock: ...


def file_lock_for(format: str, policy: StalenessPolicy) -> FileLockOf:
    """`file_lock` whose `format` and `policy` default to a decoder's own: the same
    code with those keyword defaults, not a `partial`, which packs its keywords and
    the caller's into a new dict at every call (a decoder's, once a lock file)."""
    made = FunctionType(
        file_lock.__code__, file_lock.__globals__, file_lock.__name__, file_lock.__defaults__
    )
    made.__kwdefaults__ = {**(file_lock.__kwdefaults__ or {}), "format": format, "policy": policy}
    made.__qualname__ = f"file_lock_for({format!r})"
    return cast(FileLockOf, made)


def no_pid_lock(
    file: LockFile, *, content: bytes, format: str, policy: StalenessPolicy, note: Reason
) -> Lock | None:
    """The liblockfile family's lock (liblockfile, procmail): exactly `content`, a
    `0` for no pid recorded, under a lock's name (`x.lock`, `LCK..tty`; a pid
    file's `0` is a broken pid file), aged from its last touch, the time those
    tools judge it by. Their rules differ: the caller's `policy` and `note`."""
    name = file.name.lower()
    lock_named = ("lock" in name or "lck" in name) and not name.endswith(".pid")
    if file.kind != "file" or file.raw != content or not lock_named:
        return None
    return file_lock(
        file,
        format=format,
        name=file.stem(),
        policy=policy,
        content=file.raw.decode(),
        acquired_at=file.modified_at,
        notes=(note,),
    )


def dump(doc: Mapping[str, Any]) -> bytes:
    """A lock record as lockwatch writes one: indented JSON and a final newline,
    as the seeds' own tools (jq, JSON.stringify(…, null, 2)) write theirs."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


@lean_dataclass(frozen=True, slots=True)
class Unreadable:
    """Bytes at a format's own place that are not its record: shown invalid."""

    content: Any
    defect: Reason


def json_object(
    file: LockFile, *, ours: bool, fmt: str, shape: str
) -> Mapping[str, Any] | Unreadable | None:
    """The file's JSON object; `Unreadable` when the format owns the place
    (`ours`) but the bytes are not its `shape`; None when they are not and the
    place is not the format's (another decoder's turn)."""
    try:
        doc: Any = orjson.loads(file.raw)
    except orjson.JSONDecodeError:
        if not ours:
            return None
        what = "empty file" if not file.raw.strip() else "not valid JSON"
        return Unreadable(None, Reason("unparseable", f"{what} ({fmt})"))
    if not isinstance(doc, Mapping):
        if not ours:
            return None
        return Unreadable(doc, schema_violation(f"JSON {type(doc).__name__} where {shape} belongs"))
    return doc
