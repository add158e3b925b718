"""Emacs file locks: `.#<file>`, a dangling symlink to `USER@HOST.PID:BOOT`.

Read as src/filelock.c's current_lock_owner reads it: USER up to the last `@`,
HOST up to the last `.`, PID digits, then `:` (or U+F022, CIFS's mangled colon)
and the boot time in seconds since the epoch; without a boot time the text
ends after the pid. Anything else is EINVAL to Emacs: invalid here.

Emacs's own verdict (lock_if_free): a lock from another host is always live; on
its host it is silently deleted and taken when the pid is dead, or when the boot
time differs from this boot's by more than a second. Here: a dead pid is
`holder_dead`, and a live pid under another boot time is `pid_reused` (the
holder records the boot; the verdict compares it with this host's).

Emacs falls back to a regular file with the same text where symlinks fail (FAT,
CIFS); those are not listed: `.#name` regular files are also CVS's backups.
"""

from __future__ import annotations

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders.base import (
    MAX_PID,
    Claims,
    LockFile,
    file_lock_for,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "emacs"
POLICY = StalenessPolicy(pid_liveness=True)
_PREFIX = ".#"
# Emacs reads at most this much lock text (MAX_LFINFO); longer is not a lock of its.
_MAX_TEXT = 8 * 1024
# How CIFS stores a ':' in a symlink target; Emacs accepts it in the colon's place.
_CIFS_COLON = "\uf022"


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("symlink",)
# The only entries `read` may claim (base.Claims): `.#x` symlinks.
CLAIMS = Claims(kinds=("symlink",), prefixes=(_PREFIX,))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def wants(path: str, kind: str) -> bool:
    name = path.rpartition("/")[2]
    return kind == "symlink" and name.startswith(_PREFIX) and len(name) > len(_PREFIX)


def parse(text: str) -> tuple[str, str, int, int | None] | None:
    """(user, host, pid, boot time or None) as Emacs reads `text`, else None."""
    if len(text) > _MAX_TEXT:
        return None
    at = text.rfind("@")
    dot = text.rfind(".")
    if at < 0 or dot < at:
        return None
    user, host, rest = text[:at], text[at + 1 : dot], text[dot + 1 :]
    pid_text, colon, boot_text = rest.replace(_CIFS_COLON, ":", 1).partition(":")
    if not _digits(pid_text) or (colon and not _digits(boot_text)):
        return None
    pid = int(pid_text)
    if not 0 < pid <= MAX_PID:
        return None  # Emacs would delete it as dead on its host; it names no process
    return user, host, pid, int(boot_text) if colon else None


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def read(file: LockFile) -> Lock | None:
    if file.kind != "symlink" or not wants(file.path, "symlink"):
        return None
    target = file.target or ""
    name = file.name[len(_PREFIX) :]
    parsed = parse(target)
    if parsed is None:
        return _file_lock(
            file,
            name=name,
            content={"symlink_target": target[:200]},
            acquired_at=file.modified_at,
            defects=(
                Reason(
                    "unparseable",
                    f"an Emacs lock names its holder USER@HOST.PID[:BOOT], not {target[:80]!r}",
                ),
            ),
        )
    user, host, pid, boot = parsed
    return _file_lock(
        file,
        name=name,
        content={"user": user, "host": host, "pid": pid, "boot_time": boot},
        holder=Holder(pid=pid, host=host, actor=user or None, boot_time=boot),
        acquired_at=file.modified_at,  # the symlink is made when the buffer is first modified
    )


handover = no_handover  # a symlink, not content: break it


refresh = no_refresh
