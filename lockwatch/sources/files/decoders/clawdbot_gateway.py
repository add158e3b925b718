"""clawdbot's gateway lock: `gateway.<hash>.lock`.

clawdbot (dist/infra/gateway-lock.js) keeps one gateway per config file:
`$TMPDIR/clawdbot-<uid>/gateway.<sha1(configPath)[:8]>.lock` (`moltbot-<uid>`
after the rename), created with O_CREAT|O_EXCL, holding compact JSON
`{pid, createdAt, configPath, startTime}`; `startTime` (Linux only) is field 22
of /proc/<pid>/stat, the holder's start in clock ticks since boot. An acquirer
(resolveGatewayOwnerStatus) removes it when the pid is dead or, on Linux, when
the live pid's start time differs (a recycled pid); a live owner with the same
start time holds it however old it is. Without startTime it checks the pid's
command line for a gateway instead.
"""

from __future__ import annotations

from typing import Any

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.files.decoders.base import (
    MAX_INTEGER,
    Claims,
    Fields,
    LockFile,
    Unreadable,
    file_lock_for,
    json_object,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "clawdbot-gateway"
# With startTime, clawdbot compares start ticks and nothing else (no age, and
# not when the process started against createdAt): time_by_writer keeps
# lockwatch from adding that check.
POLICY = StalenessPolicy(pid_liveness=True, time_by_writer=True)
# Without startTime clawdbot asks whether the live pid's argv is a gateway's;
# lockwatch has no argv rule, so a pid started after createdAt (so not the
# writer: the writer is the gateway itself) stands in for "not a gateway".
POLICY_NO_TICKS = StalenessPolicy(pid_liveness=True)

_NAME = lazy_compile(r"gateway\.[0-9a-f]{8}\.lock")
# `clawdbot` alone where the platform has no getuid (resolveGatewayLockDir).
_DIR = lazy_compile(r"(?:clawdbot|moltbot)(?:-[0-9]+)?")
_KEYS = frozenset({"pid", "createdAt", "configPath", "startTime"})


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): `gateway.<hex>.lock`.
CLAIMS = Claims(prefixes=("gateway.",))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


wants = wants_none  # `*.lock`: the scanner lists it anyway


def read(file: LockFile) -> Lock | None:
    """`gateway.<8 hex>.lock` in `clawdbot-<uid>/`, or anywhere with its shape."""
    if file.kind != "file" or not _NAME.fullmatch(file.name):
        return None
    ours_by_place = _DIR.fullmatch(file.parents(1)[0]) is not None
    doc = json_object(file, ours=ours_by_place, fmt=FORMAT, shape="{pid, createdAt, configPath}")
    if doc is None:
        return None
    if isinstance(doc, Unreadable):
        return _lock(file, doc.content, defects=(doc.defect,))
    if not ours_by_place and not ({"pid", "createdAt", "configPath"} <= set(doc) <= _KEYS):
        return None
    fields = Fields(doc)
    pid = fields.pid()
    created = fields.timestamp("createdAt")
    config = fields.text("configPath")
    ticks = fields.integer("startTime", required=False, minimum=0, maximum=MAX_INTEGER)
    return _lock(
        file,
        doc,
        holder=Holder(pid=pid, operation="gateway", start_ticks=ticks),
        acquired_at=created,
        scope=(config,) if config else (),
        defects=tuple(fields.defects),
        policy=POLICY if ticks is not None else POLICY_NO_TICKS,
    )


def _lock(file: LockFile, content: Any, **fields: Any) -> Lock:
    """Its lock (`fields`: file_lock's), named by the file without `.lock`."""
    return _file_lock(file, name=file.name[: -len(".lock")], content=content, **fields)


handover = no_handover  # not stealable


refresh = no_refresh
