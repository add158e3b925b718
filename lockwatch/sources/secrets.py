"""Secrets every server source handles alike: a password file read safely, and a
password given on the command line hidden from `ps` once it has been read."""

from __future__ import annotations

import os
import stat


class PasswordFileError(ValueError):
    """The config's password_file cannot be used; the message says why."""


def read_password_file(path: str) -> str:
    """The password in `path`: its first line. Refused when others may read it, as
    libpq refuses a ~/.pgpass that group or others can read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise PasswordFileError(f"password_file {path}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PasswordFileError(f"password_file {path}: not a regular file")
        if st.st_mode & 0o077:
            raise PasswordFileError(
                f"password_file {path}: group or others can read it (mode"
                f" {stat.S_IMODE(st.st_mode):o}); chmod 600 it"
            )
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    password = data.decode("utf-8", "replace").splitlines()[0] if data.strip() else ""
    if not password:
        raise PasswordFileError(f"password_file {path}: empty")
    return password


# -- a password on the command line ------------------------------------------------
#
# Every local user can read a process's arguments (`ps`, /proc/<pid>/cmdline)
# for as long as it runs. lockwatch overwrites the password in its own argument
# area once it has read it. Options weighed: `setproctitle` (a C extension: a
# dependency for one call), prctl(PR_SET_MM_ARG_START) (needs CAP_SYS_RESOURCE),
# or writing the bytes in place: the kernel shows /proc/<pid>/cmdline from the
# memory between the arg_start and arg_end that /proc/self/stat gives, and
# CPython works on its own copy of argv, so overwriting that memory (same
# length, ctypes) hides the password without a dependency. It is visible for
# the moment before (interpreter start, imports): the warning says so, and
# names the ways that never show it.


def hide_in_arguments(secrets: set[str]) -> bool:
    """Overwrite each of `secrets` with `*` in this process's argument memory, the
    bytes /proc/<pid>/cmdline (and so `ps`) shows. False where it cannot be done."""
    import ctypes

    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        # /proc/self/stat fields 48 and 49 (proc(5)); fields[0] is field 3.
        start, end = int(fields[45]), int(fields[46])
        with open("/proc/self/cmdline", "rb") as handle:
            shown = handle.read()
    except (OSError, ValueError, IndexError):
        return False
    if not 0 < start < end or end - start > 1 << 24:
        return False
    area = ctypes.string_at(start, end - start)
    if not shown or not area.startswith(shown.rstrip(b"\0")):
        return False  # not the bytes the kernel shows: touch nothing
    changed = area
    for secret in sorted(secrets, key=len, reverse=True):
        raw = os.fsencode(secret)
        changed = changed.replace(raw, b"*" * len(raw))
    if changed == area:
        return True
    for offset, (old, new) in enumerate(zip(area, changed, strict=True)):
        if old != new:
            ctypes.memset(start + offset, new, 1)
    return True
