"""zc.lockfile: a pid file held with flock while its process lives.

zc.lockfile writes its content template after one leading space (" {pid}" by
default, or e.g. " {pid};{hostname}") once it holds an flock on the file, and
keeps the file and its content after release: the pid never says it is held,
the kernel does (a kernel-lock sentinel). Its own code never reads the content.
"""

from __future__ import annotations

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.files.decoders.base import (
    MAX_PID,
    Claims,
    LockFile,
    file_lock_for,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "zc.lockfile"
POLICY = StalenessPolicy(pid_liveness=True, kernel_sentinel=True)
_MAX_BYTES = 300
# Template fields are split on anything a host name cannot hold.
_SEPARATORS = lazy_compile(r"[^\w.-]+")
_MAX_TOKENS = 4


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): any name; a space first.
CLAIMS = Claims(leading=b" ")


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


wants = wants_none


def read(file: LockFile) -> Lock | None:
    """`" " + template + "\n"`, the template one line with the pid and/or the
    host (`{pid}`, `{pid};{hostname}`, `{hostname}:{pid}`, `  {pid}`), else None."""
    raw = file.raw
    if file.kind != "file" or len(raw) > _MAX_BYTES:
        return None
    if not raw.startswith(b" ") or not raw.endswith(b"\n") or raw.count(b"\n") != 1:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text[:-1].isprintable():
        return None
    tokens = [token for token in _SEPARATORS.split(text) if token]
    numbers = [token for token in tokens if token.isascii() and token.isdigit()]
    words = [token for token in tokens if token not in numbers]
    if not tokens or len(tokens) > _MAX_TOKENS or len(numbers) > 1:
        return None
    pid = int(numbers[0]) if numbers else None
    if pid is not None and not 0 < pid <= MAX_PID:
        return None
    if pid is None and len(tokens) != 1:
        return None  # `{hostname}` alone is one word; more words are someone else's
    # Only a lone word beside the pid is surely `{hostname}`; labels make it a guess.
    host = words[0] if len(words) == 1 and len(tokens) <= 2 else None
    return _file_lock(
        file,
        content=text,
        holder=Holder(pid=pid, host=host),
        acquired_at=file.modified_at,  # written right after the flock was taken
    )


handover = no_handover  # held by an flock, not by its content: signal the holder instead


refresh = no_refresh
