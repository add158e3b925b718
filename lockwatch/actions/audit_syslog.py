"""`--audit-syslog`: each audit record's seq and hash sent to syslog/journald.

Python's `syslog` module (libc's syslog(3)) drops a message silently when no
syslog daemon listens, so an operator who asked for a second witness could get
none and never know. This sends the datagram itself, to the same socket libc
uses, and knows whether it arrived: with `required` (`--audit-syslog`, or
`audit_syslog = true`) an action is refused before anything is written or done
when syslog cannot be reached; with `best-effort` it goes ahead, and says once
that its records went without.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import syslog
import time
from collections.abc import Callable

REQUIRED = "required"
BEST_EFFORT = "best-effort"
MODES = (REQUIRED, BEST_EFFORT)
TAG = "lockwatch-audit"
# Where syslog(3) sends (journald listens there too); LOCKWATCH_SYSLOG_SOCKET
# names another (a test's listener, a chroot's socket).
SOCKET_ENV = "LOCKWATCH_SYSLOG_SOCKET"
DEFAULT_SOCKET = "/dev/log"
_PRIORITY = syslog.LOG_AUTHPRIV | syslog.LOG_NOTICE
_TIMEOUT_S = 1.0


class AnchorUnreachable(Exception):
    """Syslog cannot be reached; the message says where and why."""


def _stderr(line: str) -> None:
    print(f"lockwatch: {line}", file=sys.stderr)


class SyslogAnchor:
    """Sends anchor lines to syslog; `check` says whether it can be reached now."""

    def __init__(
        self,
        mode: str = REQUIRED,
        *,
        path: str | None = None,
        warn: Callable[[str], None] = _stderr,
    ) -> None:
        self.mode = mode
        self.path = path or os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET
        self._warn = warn
        self.missed = 0  # anchor lines that did not reach syslog

    @property
    def required(self) -> bool:
        return self.mode == REQUIRED

    def _send(self, message: bytes) -> None:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.settimeout(_TIMEOUT_S)
                sock.connect(self.path)
                sock.send(message)
        except OSError as exc:
            raise AnchorUnreachable(f"{self.path}: {exc.strerror or exc}") from None

    def check(self) -> str | None:
        """Why syslog cannot take a record now, or None: a connect, and room in its
        queue, nothing sent. A connect alone succeeds on a socket nobody reads: its
        queue full (syslog stalled), the intent's anchor would then time out after
        the intent is written. Linux says a connected datagram socket is writable
        only while its peer's queue has room."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.settimeout(_TIMEOUT_S)
                sock.connect(self.path)
                _, writable, _ = select.select([], [sock], [], _TIMEOUT_S)
        except OSError as exc:
            return f"{self.path}: {exc.strerror or exc}"
        if not writable:
            return f"{self.path}: its queue is full, nothing reads it (syslog stalled)"
        return None

    def __call__(self, line: str) -> None:
        """Send `line` as syslog(3) would (RFC 3164 on the local socket);
        AnchorUnreachable when it did not get there."""
        stamp = time.strftime("%b %e %H:%M:%S")
        message = f"<{_PRIORITY}>{stamp} {TAG}[{os.getpid()}]: {line}".encode()
        try:
            self._send(message)
        except AnchorUnreachable as exc:
            self.missed += 1
            if self.missed == 1 and not self.required:
                self._warn(
                    f"warning: syslog cannot be reached ({exc}): this run's audit records"
                    " went without syslog anchors (--audit-syslog=best-effort)"
                )
            raise

    def missed_after_all(self, exc: AnchorUnreachable) -> None:
        """A required anchor that was reachable when the action began, missed after."""
        if self.missed == 1:
            self._warn(
                f"warning: syslog cannot be reached ({exc}): audit records after the"
                " action's intent went without syslog anchors"
            )


def syslog_anchor(mode: str | bool | None) -> SyslogAnchor | None:
    """The anchor `--audit-syslog[=MODE]` (or the config's audit_syslog) asks
    for: True or "required", "best-effort"; None when it is off."""
    if not mode:
        return None
    return SyslogAnchor(REQUIRED if mode is True else str(mode))
