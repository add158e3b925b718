"""Secrets every server source handles alike: a password file read safely, and a
password given on the command line hidden from `ps` once it has been read."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.slots import lean_dataclass


class PasswordFileError(ValueError):
    """The config's password_file cannot be used; the message says why."""


class TokenFileError(ValueError):
    """A bearer token's file (a serve's --token-file, a remote's) cannot be used;
    the message says why."""


# A token is one line: a file larger than this holds none.
MAX_TOKEN_BYTES = 4096


def read_token(path: str) -> str:
    """The token in file `path`: its content, surrounding whitespace stripped."""
    from lockwatch.trusted import read_file  # bounded; a file only you or root wrote

    try:
        data = read_file(os.path.expanduser(path), MAX_TOKEN_BYTES)
    except OSError as exc:
        raise TokenFileError(f"token file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_TOKEN_BYTES:
        raise TokenFileError(f"token file {path}: too large to hold a token")
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise TokenFileError(f"token file {path}: not UTF-8 text") from None
    if not token or any(ch.isspace() or not ch.isprintable() for ch in token):
        raise TokenFileError(f"token file {path}: empty, or not one line of printable text")
    return token


def read_password_file(path: str) -> str:
    """The password in `path`: its first line. Refused when others may read or
    write it (as libpq refuses a ~/.pgpass that group or others can read), when
    it is owned by another user, or sits where another user could replace it;
    read bounded, and a FIFO or device is refused unopened (lockwatch.trusted)."""
    from lockwatch.trusted import SECRET, read_file

    try:
        data = read_file(path, 4096, SECRET)
    except OSError as exc:
        raise PasswordFileError(f"password_file {path}: {exc.strerror or exc}") from exc
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


def hide_in_arguments(secrets: set[str], within: Sequence[str] = ()) -> bool:
    """Overwrite each of `secrets` with `*` in this process's argument memory, the
    bytes /proc/<pid>/cmdline (and so `ps`) shows: in every argument, or only in
    those that hold one of `within`. False where it cannot be done."""
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
    raws = [os.fsencode(secret) for secret in sorted(secrets, key=len, reverse=True)]
    holders = [os.fsencode(value) for value in within if value]
    arguments = area.split(b"\0")
    for number, argument in enumerate(arguments):
        if holders and not any(holder in argument for holder in holders):
            continue
        for raw in raws:
            argument = argument.replace(raw, b"*" * len(raw))
        arguments[number] = argument
    changed = b"\0".join(arguments)
    for offset, (old, new) in enumerate(zip(area, changed, strict=True)):
        if old != new:
            ctypes.memset(start + offset, new, 1)
    return True


def hide_where_given(secrets: set[str], values: Iterable[str]) -> bool:
    """`hide_in_arguments`, touching only the arguments that hold one of `values`
    (an option's values: `--redis URL` or `--redis=URL`), so a short password
    does not star out every other argument that happens to contain it."""
    return hide_in_arguments(secrets, tuple(values))


# -- which options carry passwords: each source declares its own ----------------


@lean_dataclass(frozen=True)
class InArguments:
    """An option whose values may carry a password (`--redis redis://:pw@h`): how
    to find it in a value, and where the operator should keep it instead."""

    flag: str  # as the warning names it: "--redis"
    find: Callable[[str], set[str]]  # every form of the password in one value
    instead: str  # the ways that never show it: the warning's advice


_warned: set[str] = set()


def hide_from_arguments(values: Sequence[str], carries: InArguments) -> set[str]:
    """The passwords in `values` (an option's values as given on the command line):
    hidden from the process's arguments, and said once per flag on stderr."""
    secrets = {secret for value in values for secret in carries.find(value) if secret}
    if not secrets:
        return secrets
    hidden = hide_where_given(secrets, values)
    if carries.flag not in _warned:
        _warned.add(carries.flag)
        sys.stderr.write(
            f"lockwatch: warning: a password in {carries.flag} is readable by every local user"
            f" (ps) while lockwatch starts{'' if hidden else ' and runs'}; use {carries.instead}\n"
        )
        sys.stderr.flush()
    return secrets


def secret_option(*decls: str, carries: InArguments, **attrs: Any) -> Callable[[Any], Any]:
    """`click.option(*decls, **attrs)` whose values, when given on the command
    line, have their passwords hidden from `ps` as soon as they are parsed."""
    import click

    return click.option(*decls, cls=_secret_option_class(), carries=carries, **attrs)


@lru_cache(maxsize=1)
def _secret_option_class() -> type[Any]:
    import click
    from click.core import ParameterSource

    class SecretOption(click.Option):
        def __init__(self, *args: Any, carries: InArguments, **attrs: Any) -> None:
            super().__init__(*args, **attrs)
            self.carries = carries

        def process_value(self, ctx: click.Context, value: Any) -> Any:
            if (
                not ctx.resilient_parsing
                and self.name is not None
                and ctx.get_parameter_source(self.name) is ParameterSource.COMMANDLINE
            ):
                given = value if isinstance(value, tuple | list) else (value,)
                hide_from_arguments([v for v in given if isinstance(v, str)], self.carries)
            return super().process_value(ctx, value)

    return SecretOption


# -- the usual places of a password in a URL -------------------------------------

# user:password@ (up to the last @ before the path: a password may hold an
# unencoded @), and password= or token= in a query string.
_URL_USERINFO = lazy_compile(r"://[^:/@\s]*:([^\s/?#]*)@")
_URL_QUERY = lazy_compile(r"[?&;](?:password|passwd|pwd|token|access_token)=([^&#\s]*)", re.I)


def url_passwords(value: str) -> set[str]:
    """Each password a URL (or several, comma-separated) carries, as written and
    percent-decoded: its user info's, and a `password=` in its query."""
    found: set[str] = set()
    for pattern in (_URL_USERINFO, _URL_QUERY):
        for match in pattern.finditer(value):
            raw = match.group(1)
            # Several comma-separated URLs (--redlock): one URL's password stops at
            # the next URL.
            for piece in (raw, raw.split(",")[0].rpartition("@")[0] or raw):
                found.update({piece, unquote(piece)})
    return {secret for secret in found if secret}


def hide_url_passwords(arguments: Sequence[str]) -> None:
    """Any URL's password in any of `arguments` hidden from `ps`, without a word:
    for options whose source refuses credentials in a URL (and says so)."""
    for argument in arguments:
        secrets = url_passwords(argument)
        if secrets:
            hide_where_given(secrets, (argument,))
