"""Files lockwatch takes its settings, secrets and recordings from.

lockwatch runs as root, in shared lock directories where anyone may write. A
file it reads settings or secrets from (a config, a token or password file, the
audit key) therefore counts only when nobody but its owner could have written
it, and its owner is you or root: the rule of ssh's StrictModes and git's
safe.directory. Each directory above it counts too, since whoever can write a
directory can put another file in its place, unless the sticky bit stops them
(as on /tmp and /run/lock). `--config FILE` names a file on purpose: its owner
may then be anyone, but it must still be writable by its owner alone.

Every read is bounded and never blocks: the kind of file is checked before it is
opened (a FIFO, a device, a directory is refused by name), it is opened
non-blocking, checked again on the open descriptor, and at most `limit + 1`
bytes are read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from typing import BinaryIO

from lockwatch.model.slots import lean_dataclass

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = MIB

_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@lean_dataclass(frozen=True)
class Trust:
    """Who may have written a file for lockwatch to believe it."""

    # The operator named this very file (--config FILE): any owner will do,
    # as long as nobody else can write it.
    named: bool = False
    # A secret (the audit key): readable and writable by its owner alone.
    secret: bool = False


SETTINGS = Trust()
NAMED = Trust(named=True)
SECRET = Trust(secret=True)


class Refused(OSError):
    """A file lockwatch will not read: `strerror` says why (and how to fix it)."""

    def __init__(self, path: str | os.PathLike[str], why: str, *, untrusted: bool = False) -> None:
        super().__init__(errno.EPERM, why, os.fspath(path))
        self.why = why
        # Refused for who could have written it (not for what it is): a file
        # lockwatch only looked for is then passed over, not an error.
        self.untrusted = untrusted

    def __str__(self) -> str:
        return f"{os.fspath(self.filename)}: {self.why}"


# The kernel's own file systems: their "regular" files are views of kernel state
# (/proc/kmsg blocks on read whatever the flags, /proc/self/pagemap is as large as
# the address space), all of size 0 or a made-up one: never settings or recordings.
_PSEUDO_FS = frozenset(
    {
        "proc",
        "sysfs",
        "debugfs",
        "tracefs",
        "securityfs",
        "configfs",
        "cgroup",
        "cgroup2",
        "pstore",
        "efivarfs",
        "bpf",
        "fusectl",
        "binfmt_misc",
    }
)


def _file_system(dev: int) -> str | None:
    """The type of the file system mounted on device `dev`, from the kernel's
    own table of mounts (None where it cannot be read or is not there)."""
    wanted = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        with open("/proc/self/mountinfo", "rb") as table:
            for raw in table:
                fields = raw.decode("utf-8", "replace").split()
                if len(fields) > 2 and fields[2] == wanted and "-" in fields[6:]:
                    return fields[fields.index("-", 6) + 1]
    except OSError:
        return None
    return None


def kernel_view(st: os.stat_result) -> str | None:
    """Why a "regular" file of status `st` is no file to read: one of the
    kernel's own file systems (/proc, /sys) holds it."""
    kind = _file_system(st.st_dev)
    if kind in _PSEUDO_FS:
        return f"a file of the kernel's {kind} file system"
    return None


def special(mode: int) -> str | None:
    """What a file of `mode` is when it is not a regular file ("a FIFO", ...)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def who(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _private_group(gid: int, owner: int) -> bool:
    """A group that is its owner's own (named after them, nobody else in it):
    group-writable then means writable by the owner alone (umask 002 systems).
    Nobody else in it counts both ways a user can be: a member listed in
    /etc/group, or a user whose primary group it is (/etc/passwd's gid, which
    /etc/group never lists: `useradd -g root grproot` writes root's 0664 files)."""
    import grp
    import pwd

    try:
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    name = who(owner)
    if group.gr_name != name or not set(group.gr_mem) <= {name}:
        return False
    return all(user.pw_name == name for user in pwd.getpwall() if user.pw_gid == gid)


def _writers(st: os.stat_result) -> str | None:
    """Who besides the owner can write a file or directory of this status."""
    if st.st_mode & stat.S_IWOTH:
        return "every user"
    if st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid, st.st_uid):
        import grp

        try:
            return f"group {grp.getgrgid(st.st_gid).gr_name}"
        except KeyError:
            return f"group {st.st_gid}"
    return None


def _mode(st: os.stat_result) -> str:
    return f"mode {stat.S_IMODE(st.st_mode):04o}"


def file_problem(path: str, st: os.stat_result, trust: Trust) -> str | None:
    """Why a file of status `st` cannot be trusted (with the command that fixes
    it), or None."""
    import shlex  # for the fix's command; a run with no config file needs none

    me = os.geteuid()
    q = shlex.quote(path)
    if not trust.named and st.st_uid not in (me, 0):
        return (
            f"owned by {who(st.st_uid)}, not by you ({who(me)}) or root: whoever owns it"
            f" decides what it says (make it yours: chown {who(me)} {q})"
        )
    if trust.secret and st.st_mode & 0o077:
        return (
            f"group or others can read or write it ({_mode(st)}): a key others can read is"
            f" no key (chmod 600 {q})"
        )
    writers = _writers(st)
    if writers is not None:
        return f"{writers} can write it ({_mode(st)}) (chmod go-w {q})"
    return None


def owned_problem(st: os.stat_result) -> str | None:
    """Why a file or directory lockwatch writes into (a file beside its audit log,
    a recording, a tombstone directory) is not the runner's own, or None: it
    must be yours (the effective user's), and nobody else may write it. One that
    another user made first at that name (in a sticky /tmp or /run/lock, anyone
    may) would have root write where they can read, swap or remove it."""
    me = os.geteuid()
    if st.st_uid != me:
        return (
            f"owned by {who(st.st_uid)}, not by you ({who(me)}): someone else made it"
            " (look at it, then remove it)"
        )
    writers = _writers(st)
    if writers is not None:
        return f"{writers} can write it ({_mode(st)})"
    return None


def _own_regular(st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "a symlink: lockwatch never writes through one"
    kind = special(st.st_mode)
    if kind is not None:
        return f"{kind}, not a regular file"
    return owned_problem(st)


def own_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the name `path` (not followed) holds no file lockwatch may write as its
    own (owned_problem; a symlink, a FIFO, a device…), or None: free, or yours."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None  # free (or no directory there: opening it says so)
    return _own_regular(st)


_WRITE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def open_own(path: str | os.PathLike[str], flags: int) -> tuple[int, bool]:
    """(descriptor, made now) of your own regular file at `path`, opened with
    `flags` (O_WRONLY, O_APPEND…). A free name is made exclusively (O_EXCL, 0600);
    a file already there is opened without following a symlink or waiting on a
    FIFO (O_NOFOLLOW, O_NONBLOCK), and checked on the descriptor: Refused unless
    it is a regular file you own that nobody else can write."""
    for _ in range(3):  # made and removed by someone else between two tries
        try:
            return os.open(path, flags | _WRITE | os.O_CREAT | os.O_EXCL, 0o600), True
        except FileExistsError:
            pass
        why = own_file_problem(path)  # before opening: a tape device rewinds on open
        if why is not None:
            raise Refused(path, why, untrusted=True)
        try:
            fd = os.open(path, flags | _WRITE)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):  # swapped for a link, a FIFO
                raise Refused(path, own_file_problem(path) or "not a regular file") from exc
            raise
        why = _own_regular(os.fstat(fd))  # swapped between the lstat and the open
        if why is not None:
            os.close(fd)
            raise Refused(path, why, untrusted=True)
        os.set_blocking(fd, True)  # a regular file: reads and writes never wait anyway
        return fd, False
    raise Refused(path, "made and removed again while lockwatch opened it", untrusted=True)


def passage_problem(st: os.stat_result, owners: set[int]) -> str | None:
    """Why a directory of status `st` lets someone besides `owners` put another
    entry in place of one of its own, or None (the sticky bit stops them)."""
    if st.st_uid not in owners:
        return f"owned by {who(st.st_uid)}"
    writers = _writers(st)
    if writers is not None and not st.st_mode & stat.S_ISVTX:
        return f"writable by {writers} ({_mode(st)}) without the sticky bit"
    return None


def _ancestors(directory: str) -> Iterator[str]:
    current = directory
    while True:
        yield current
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent


def dir_problem(path: str, owner: int, trust: Trust) -> str | None:
    """Why the directories above `path` (a file owned by `owner`) let someone
    else put another file in its place, or None. Both the path as given and the
    one it resolves to are checked, and so is a symlink at `path` itself."""
    me = os.geteuid()
    owners = {me, 0} | ({owner} if trust.named else set())
    try:
        link = os.lstat(path)
    except OSError:
        link = None
    if link is not None and stat.S_ISLNK(link.st_mode) and link.st_uid not in owners:
        return f"it is a symlink owned by {who(link.st_uid)}, who decides where it points"
    seen: set[str] = set()
    for start in (os.path.dirname(os.path.abspath(path)), os.path.dirname(os.path.realpath(path))):
        for directory in _ancestors(start):
            if directory in seen:
                continue
            seen.add(directory)
            try:
                st = os.stat(directory)
            except OSError:
                continue  # gone or unsearchable: opening the file says so
            why = passage_problem(st, owners)
            if why is not None:
                import shlex

                q = shlex.quote(directory)
                fix = (
                    f"chown {who(me)} {q}, or move it"
                    if st.st_uid not in owners
                    else f"chmod go-w {q}, or chmod +t {q}"
                )
                return (
                    f"its directory {directory} is {why}: they can put another file in its"
                    f" place ({fix})"
                )
    return None


def problem(path: str, st: os.stat_result, trust: Trust) -> str | None:
    """Why the file at `path`, of status `st`, cannot be trusted; None if it can."""
    return file_problem(path, st, trust) or dir_problem(path, st.st_uid, trust)


def _open_regular(path: str, limit: int | None, trust: Trust | None) -> tuple[int, int]:
    """A descriptor of the regular file at `path`, checked, and its size."""
    st = os.stat(path)
    kind = special(st.st_mode)  # before opening: a tape device rewinds on open
    # Whose it is first: a FIFO someone else planted is theirs before it is a FIFO
    # (a config they planted is passed over, not an error).
    why = file_problem(path, st, trust) if trust is not None else None
    if why is not None and (kind is None or st.st_uid not in (os.geteuid(), 0)):
        raise Refused(path, why, untrusted=True)
    if kind is not None:
        raise Refused(path, f"{kind}, not a regular file")
    view = kernel_view(st)  # before opening: /proc/kmsg's read blocks, non-blocking or not
    if view is not None:
        raise Refused(path, f"{view}, not a regular file")
    fd = os.open(path, _OPEN)
    try:
        st = os.fstat(fd)
        kind = special(st.st_mode) or kernel_view(st)  # replaced between the stat and the open
        if kind is not None:
            raise Refused(path, f"{kind}, not a regular file")
        if trust is not None:
            why = problem(path, st, trust)
            if why is not None:
                raise Refused(path, why, untrusted=True)
        if limit is not None and st.st_size > limit:
            raise Refused(path, f"{st.st_size:,} bytes, more than the {_size(limit)} allowed")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_file(path: str | os.PathLike[str], limit: int, trust: Trust | None = SETTINGS) -> bytes:
    """The content of the regular file at `path`, at most `limit` bytes, if
    `trust` allows it (None: any owner, as for recordings). OSError when it
    cannot be read; `Refused` (an OSError) when it will not be."""
    name = os.fspath(path)
    fd, _ = _open_regular(name, limit, trust)
    try:
        data = read_at_most(fd, limit)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew after the fstat
        raise Refused(name, f"more than the {_size(limit)} allowed")
    return data


def read_at_most(fd: int, limit: int) -> bytes:
    """What `fd` holds from its offset to its end, but never more than one byte
    past `limit`: a caller tells a file over its limit by that byte."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def open_file(path: str | os.PathLike[str], limit: int, trust: Trust | None = None) -> BinaryIO:
    """The regular file at `path` opened for reading in binary, for a reader that
    streams it (and bounds its own lines); refused as `read_file` refuses."""
    name = os.fspath(path)
    fd, _ = _open_regular(name, limit, trust)
    # Reads need not be non-blocking any more: it is a regular file.
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _size(limit: int) -> str:
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if limit >= unit and limit % unit == 0:
            return f"{limit // unit} {name}"
    return f"{limit:,} bytes"
