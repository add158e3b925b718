"""Format detection: each tool's own files first, then JSON by content with
location as a hint, `generic` for the rest.

Two kinds of format module:
- a *tool's* format (NATIVE: git, flufl.lock, ...) reads the entry as that tool
  would: `wants(path, kind)` says which extra names its locks have (the scanner
  lists them), and `read(file)` claims an entry (a file, a symlink or a lock
  directory) by its name, place and bytes, or returns None;
- a *JSON record* format (DECODERS: the seed systems) has claims(doc),
  hinted(file) and decode(doc, file).
Both have FORMAT, POLICY and the writers stealing needs: handover(content, new)
and refresh(content, at) (None: it cannot be stolen). Adding a format means
adding its module to NATIVE or DECODERS.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import orjson

from lockwatch.model.compact import Document
from lockwatch.model.lock import Lock, Reason, amended
from lockwatch.sources.files.decoders import (
    cargo,
    clawdbot,
    clawdbot_gateway,
    clawdbot_session,
    dpkg,
    emacs,
    flufl,
    generic,
    git,
    gitclaw,
    kernel_file,
    leveldb,
    liblockfile,
    libreoffice,
    little_loops,
    lockdir,
    loops_queue,
    mercurial,
    pacman,
    procmail,
    pylockfile,
    rpm,
    softfilelock,
    sqlite,
    terraform,
    tower_fleet,
    vim_swap,
    zc_lockfile,
)
from lockwatch.sources.files.decoders.base import LockFile, file_lock
from lockwatch.sources.files.decoders.dispatch import Dispatch
from lockwatch.sources.files.facts import facts_of, refiled
from lockwatch.sources.files.policy import StalenessPolicy

# Tools' own formats, most specific place or shape first; lockdir (any `x.lock/`)
# is the fallback for directories.
NATIVE: tuple[ModuleType, ...] = (
    git,
    terraform,
    mercurial,
    vim_swap,
    dpkg,
    leveldb,
    pacman,
    rpm,
    cargo,
    sqlite,
    loops_queue,
    clawdbot_session,
    clawdbot_gateway,
    flufl,
    softfilelock,
    zc_lockfile,
    liblockfile,
    procmail,
    pylockfile,
    emacs,
    libreoffice,
    lockdir,
)
# Most specific signatures first: tower-fleet's schema is the strictest.
DECODERS: tuple[ModuleType, ...] = (tower_fleet, gitclaw, little_loops, clawdbot)
FORMATS: tuple[str, ...] = (
    *tuple(d.FORMAT for d in NATIVE),
    *tuple(d.FORMAT for d in DECODERS),
    generic.FORMAT,
    kernel_file.FORMAT,
)


# Per kind of entry, the formats whose `wants` may say yes (WANTS_KINDS; a format
# that does not say asks for every kind): a scan asks this of every directory and
# file it passes, and most formats name their locks `*.lock` anyway.
_WANTERS: dict[str, tuple[ModuleType, ...]] = {
    kind: tuple(m for m in NATIVE if kind in getattr(m, "WANTS_KINDS", (kind,)))
    for kind in ("file", "symlink", "dir")
}


def wanters(kind: str) -> tuple[ModuleType, ...]:
    """The formats whose `wants` may say yes for an entry of `kind`."""
    return _WANTERS.get(kind, NATIVE)


def wanted_by_format(path: str, kind: str) -> bool:
    """Whether some tool names its locks like `path` (beyond `*.lock`/`*.pid`)."""
    wanters = _WANTERS.get(kind, NATIVE)
    return bool(wanters) and any(module.wants(path, kind) for module in wanters)


_DISPATCH = Dispatch(NATIVE)
_PREVIEW_CHARS = 4096
lock_named = generic.lock_named


def writer(format: str) -> ModuleType | None:
    """The module that writes locks of `format` (handover, refresh)."""
    for module in (*NATIVE, *DECODERS, generic, kernel_file):
        if format == module.FORMAT:
            return module
    return None


_BOM = b"\xef\xbb\xbf"
# NUL as an int: `b"\x00" in raw` first tries b"\x00" as a byte's value and
# formats a TypeError it then drops (~1,800 instructions, every file a scan reads).
_NUL = 0


def _hinted(file: LockFile) -> ModuleType | None:
    for decoder in DECODERS:
        if decoder.hinted(file):
            return decoder
    return None


def invalid(file: LockFile, code: str, message: str, content: Any = None) -> Lock:
    """A lock that cannot be read as its format: shown as invalid, never dropped."""
    hint = _hinted(file)
    fmt: str = hint.FORMAT if hint else generic.FORMAT
    policy: StalenessPolicy = hint.POLICY if hint else generic.POLICY
    return file_lock(
        file,
        format=fmt,
        name=file.stem(),
        policy=policy,
        content=content,
        acquired_at=file.modified_at,
        defects=(Reason(code, message),),
    )


def decode_unread(file: LockFile, reason: Reason) -> Lock:
    """A lock file whose bytes lockwatch's user may not read (`file.raw` empty),
    from its place alone: a format that decides by the kernel's lock only (dpkg's,
    whose files stay empty) reads it in its own words, content unneeded; anything
    else is a generic lock nothing is known of but its name and mtime."""
    native = decode_native(file)
    if native is not None and facts_of(native).policy.kernel_only:
        return refiled(native, {"unread": reason})
    return file_lock(
        file,
        format=generic.FORMAT,
        name=file.stem(),
        policy=generic.POLICY,
        content=None,
        unread=reason,
    )


def decode_native(file: LockFile) -> Lock | None:
    """The lock, if a tool's own format claims the entry; else None. Only the
    formats whose CLAIMS the entry meets are asked, in NATIVE's order."""
    for module in _DISPATCH.offered(file):
        native: Lock | None = module.read(file)
        if native is not None:
            return native
    return None


def decode_file(file: LockFile, *, compact: bool = True) -> Lock:
    """Never raises: whatever the bytes, the answer is a Lock (maybe an invalid one).
    `compact`: keep a record's content compacted (`_kept_as_read`), for a board that
    holds it; a one-shot listing, which never shows it, skips that work."""
    native = decode_native(file)
    if native is not None:
        return native
    if file.kind == "symlink":
        return invalid(
            file,
            "symlink",
            f"a symlink (to {file.target!r}) no known tool makes; lockwatch never follows"
            " links in lock directories",
            {"symlink_target": file.target},
        )
    if file.kind == "dir":  # lockdir claims every lock directory
        return invalid(file, "not_regular_file", "a directory")
    raw = file.raw
    if raw.startswith(_BOM):  # Windows tools (PowerShell 5) write one before JSON
        raw = raw[len(_BOM) :]
    if _NUL in raw:
        if not lock_named(file):
            return generic.not_a_lock(file, "binary content, and its name is not a lock's")
        return invalid(file, "unparseable", "binary content, not a lock record")
    try:
        # orjson is strict where it matters: no NaN/Infinity, no numbers that
        # overflow a double, no lone surrogates, bounded nesting.
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _decode_text(raw, file)
    if isinstance(doc, dict):
        decoded = _decode_record(doc, file)
        return _kept_as_read(decoded, doc, raw) if compact else decoded
    hint = _hinted(file)
    if type(doc) is int and hint is None:
        return generic.decode_pid_value(doc, file)
    if hint is None and not lock_named(file):
        what = f"JSON {type(doc).__name__}, not a lock record"
        return generic.not_a_lock(file, f"{what}, and its name is not a lock's", doc)
    if type(doc) is float and hint is None:  # orjson reads integers past 64 bits as floats
        return invalid(file, "unparseable", f"{doc!r} is a number but not a process id", doc)
    return invalid(
        file,
        "schema_violation" if hint is not None else "unparseable",
        f"JSON {type(doc).__name__} where a lock record (an object) belongs",
        doc,
    )


def _decode_record(doc: dict[str, Any], file: LockFile) -> Lock:
    for decoder in DECODERS:
        if decoder.claims(doc):
            lock: Lock = decoder.decode(doc, file)
            return lock
    hint = _hinted(file)
    if hint is not None:
        hinted_lock: Lock = hint.decode(doc, file)
        return hinted_lock
    if not lock_named(file) and not generic.has_lock_keys(doc):
        why = (
            "a JSON object with none of a lock's keys (pid, host, times), and its name"
            " is not a lock's"
        )
        return generic.not_a_lock(file, why, doc)
    return generic.decode(doc, file)


def _kept_as_read(lock: Lock, doc: dict[str, Any], raw: bytes) -> Lock:
    """The lock with its record (`doc`, read from `raw`) kept as those bytes, when
    the decoder kept the record whole: a large tree's board holds every lock's.
    Pretty-printed records are kept without their indentation: the same record
    (`Document` reads back an equal dict), a third smaller."""
    if lock.content is not doc:
        return lock
    try:
        compact = orjson.dumps(doc)
    except TypeError:  # nested deeper than orjson writes (it reads deeper): as read
        compact = raw
    # A copy: what orjson.dumps returns keeps its whole 4 KiB buffer resident.
    kept = bytes(memoryview(compact)) if len(compact) < len(raw) else raw
    return amended(lock, content=Document(kept))


def _decode_text(raw: bytes, file: LockFile) -> Lock:
    """Content that is not JSON: a pid file, an empty file, or garbage."""
    named_so = lock_named(file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        if not named_so:
            return generic.not_a_lock(file, "not text, and its name is not a lock's")
        return invalid(file, "unparseable", "content is not UTF-8 text")
    hint = _hinted(file)
    if not text.strip():
        if hint is not None:
            message = f"empty file where a {hint.FORMAT} record belongs"
            return invalid(file, "unparseable", message, text)
        return generic.decode_empty(text, file)
    if hint is None:
        from_text = generic.decode_text(text, file)
        if from_text is not None:
            return from_text
        if not named_so:
            lines = text.count("\n") + (not text.endswith("\n"))
            said = "1 line" if lines == 1 else f"{lines} lines"
            why = f"{said} of text, no lock record, and its name is not a lock's"
            return generic.not_a_lock(file, why, text[:_PREVIEW_CHARS])
        note = generic.decode_note(text, file)
        if note is not None:
            return note
    return invalid(
        file,
        "unparseable",
        "content is neither JSON nor a pid" if hint is None else f"not valid JSON ({hint.FORMAT})",
        text[:_PREVIEW_CHARS],
    )
