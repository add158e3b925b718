"""LibreOffice's `.~lock.<name>#` beside the document it locks.

One entry, `OOOUSERNAME,SYSUSERNAME,LOCALHOST,EDITTIME,USERURL;` (UTF-8; `\\`,
`,` and `;` escaped with a backslash; EDITTIME the writer's local time
`DD.MM.YYYY HH:MM`, no zone), as LockFileCommon::ParseEntry reads it; what it
cannot parse it reports as a corrupt lock (LockFileCorruptRequest): invalid.

It records no pid and never expires: LibreOffice shows "document in use" to
anyone else, and takes the lock silently only when user, host and profile are
its own (a leftover of its own crash). Which processes have the document open
is not the decoder's to know, so the lock stays held (with `no_pid`), and one
written on another host says so (`foreign_host`).
"""

from __future__ import annotations

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "libreoffice"
POLICY = StalenessPolicy()
_PREFIX, _SUFFIX = ".~lock.", "#"
# LibreOffice treats a lock file this large as corrupt.
_MAX_BYTES = 32000
FIELDS = ("ooo_user", "sys_user", "host", "edit_time", "user_url")
_NO_PID = Reason(
    "no_pid",
    "LibreOffice records no process: it shows the document as in use until the same user,"
    " host and profile open it again",
)


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("file",)
# The only entries `read` may claim (base.Claims): `.~lock.x#`.
CLAIMS = Claims(prefixes=(_PREFIX,))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def wants(path: str, kind: str) -> bool:
    name = path.rpartition("/")[2]
    return (
        kind == "file"
        and name.startswith(_PREFIX)
        and name.endswith(_SUFFIX)
        and len(name) > len(_PREFIX) + len(_SUFFIX)
    )


def parse(raw: bytes) -> tuple[str, ...] | None:
    """The first entry's five fields, as ParseEntry reads them; None where it throws."""
    if len(raw) >= _MAX_BYTES:
        return None
    fields: list[str] = []
    pos = 0
    for index in range(len(FIELDS)):
        value = bytearray()
        while True:
            if pos >= len(raw):
                return None
            byte = raw[pos]
            if byte == 0x5C:  # backslash: only `\\`, `\,` and `\;` are escapes
                if pos + 1 >= len(raw) or raw[pos + 1] not in b",;\\":
                    return None
                value.append(raw[pos + 1])
                pos += 2
            elif byte in b",;":
                break
            else:
                value.append(byte)
                pos += 1
        if raw[pos] != (b";" if index == len(FIELDS) - 1 else b",")[0]:
            return None
        pos += 1
        try:
            fields.append(value.decode("utf-8"))
        except UnicodeDecodeError:
            return None
    return tuple(fields)


def read(file: LockFile) -> Lock | None:
    if file.kind != "file" or not wants(file.path, "file"):
        return None
    name = file.name[len(_PREFIX) : -len(_SUFFIX)]
    fields = parse(file.raw)
    if fields is None:
        return _file_lock(
            file,
            name=name,
            content=file.raw[:200].decode("utf-8", "replace"),
            acquired_at=file.modified_at,
            defects=(
                Reason(
                    "unparseable",
                    "not a LibreOffice lock entry (user,login,host,time,profile;):"
                    " LibreOffice reports it as corrupt",
                ),
            ),
        )
    entry = dict(zip(FIELDS, fields, strict=True))
    return _file_lock(
        file,
        name=name,
        content=entry,
        holder=Holder(
            host=entry["host"] or None,
            actor=entry["sys_user"] or entry["ooo_user"] or None,
            session=entry["user_url"] or None,
        ),
        # EDITTIME is the writer's local time with no zone: the file's mtime is
        # the same moment in a known zone.
        acquired_at=file.modified_at,
        notes=(_NO_PID,),
    )


handover = no_handover  # no process to hand over from: break it


refresh = no_refresh
