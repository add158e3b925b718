"""Vim's swap files: `.<file>.swp` (then `.swo`, `.swn`, … as more Vims open
the same file), beside the file or, with `'directory'` ending in `//`, named
after its whole path with `%` for `/`.

Their first block (memline.c's `struct block0`) is what `vim -r` lists: the id
`b0` (its second byte `c`, `C`, `d`, `S` or `s` when encrypted), the Vim version
(`VIM …`), the page size, the edited file's mtime and inode, the pid of the
Vim that made it (four bytes, least significant first, whatever the machine's
byte order), the user name (40 bytes) and host name (40 bytes), NUL-padded, and
the edited file's name (900 bytes, its last byte 0x55 while the buffer has
unsaved changes).

Vim's own verdict ("process ID: N (STILL RUNNING)", swapfile_process_running):
the pid runs and the swap file was written since this host booted. Here: a dead
pid is `holder_dead` and a pid that started after the swap file was last written
is `pid_reused` (which covers a reboot); another host's swap file is unknown
(`foreign_host`: Vim checks the pid on this host, which says nothing there). A
dead Vim's swap file with unsaved changes says so: `vim -r` recovers them.
"""

from __future__ import annotations

from typing import Any

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "vim-swap"
POLICY = StalenessPolicy(pid_liveness=True, foreign_unknown=True)
# Vim's swap file names: `.swp` down to `.swa`, then `.svz` … `.saa`.
_NAME = lazy_compile(r"(?:^\.|%).+\.s(?:w[a-p]|[a-v][a-z])$")
_IDS = frozenset(b"0cCdSs")
# Where block 0's fields start, and their sizes (memline.c's struct block0).
_VERSION = slice(2, 12)
_PID = slice(24, 28)
_USER = slice(28, 68)
_HOST = slice(68, 108)
_FNAME_AT, _FNAME_SIZE = 108, 900
_BLOCK0_BYTES = _FNAME_AT + _FNAME_SIZE
_DIRTY = 0x55
# The cheap test first: a scan asks `wants` of every file it passes.
_PREFIXES = frozenset(f".s{c}" for c in "abcdefghijklmnopqrstuvw")
# Spelt out, not string.ascii_lowercase: importing `string` compiles its Template
# pattern, which only this line of a start wanted.
_LETTERS = "abcdefghijklmnopqrstuvwxyz"

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("file",)
# The only entries `read` may claim (base.Claims): `.swp` … `.saa`.
CLAIMS = Claims(suffixes=tuple(f"{p}{c}" for p in sorted(_PREFIXES) for c in _LETTERS))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def wants(path: str, kind: str) -> bool:
    name = path.rpartition("/")[2]
    return kind == "file" and name[-4:-1] in _PREFIXES and _NAME.search(name) is not None


def _text(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse(raw: bytes) -> dict[str, Any] | None:
    """Block 0's fields as `vim -r` reads them, or None when `raw` is no Vim
    swap file (Vim: "[does not look like a Vim swap file]")."""
    if len(raw) < _BLOCK0_BYTES or raw[0:1] != b"b" or raw[1] not in _IDS:
        return None
    version = _text(raw[_VERSION])
    if not version.startswith("VIM ") or version.startswith("VIM 3.0"):
        return None
    fname_field = raw[_FNAME_AT : _FNAME_AT + _FNAME_SIZE]
    return {
        "version": version,
        "pid": int.from_bytes(raw[_PID], "little"),
        "user": _text(raw[_USER]),
        "host": _text(raw[_HOST]),
        "file": _text(fname_field),
        "modified": fname_field[-1] == _DIRTY,
        "encrypted": raw[1:2] != b"0",
    }


def read(file: LockFile) -> Lock | None:
    if file.kind != "file" or not wants(file.path, "file"):
        return None
    fields = parse(file.raw)
    if fields is None:
        return None
    pid = fields["pid"] or None
    edited = fields["file"] or "[No Name]"
    notes = []
    if fields["modified"]:
        notes.append(
            Reason(
                "unsaved_changes",
                f"it holds changes to {edited} that were never written: if its Vim is gone,"
                f" recover them with `vim -r {edited}` before removing it",
            )
        )
    if pid is None:
        notes.append(Reason("no_pid", "the swap file records no process"))
    return _file_lock(
        file,
        name=edited.rpartition("/")[2] or edited,
        content=fields,
        holder=Holder(
            pid=pid,
            host=fields["host"] or None,
            actor=fields["user"] or None,
            operation=f"editing {edited}",
        ),
        # Vim writes it as it goes; the last write is when it was surely there.
        acquired_at=file.modified_at,
        notes=notes,
    )


handover = no_handover  # Vim's own file, not a record to rewrite


refresh = no_refresh
