"""Whether the dashboard still has a terminal.

A closed terminal (an SSH drop, a killed tmux) hangs up the tty: SIGHUP, and
from then on every terminal call on it fails with EIO. A process that ignores
SIGHUP (nohup, a shell's `trap '' HUP`) would otherwise redraw into nothing for
ever; asking the tty twice a second tells it that it is alone.
"""

from __future__ import annotations

import os
import sys
import termios
import threading

# How often the tty is asked: well inside the 2 s in which lockwatch must be gone.
CHECK_SECONDS = 0.5


def tty_fd() -> int | None:
    """The dashboard's input terminal, when it has one (tests and pipes: None)."""
    stream = sys.__stdin__
    if stream is None:
        return None
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return None
    return fd if os.isatty(fd) else None


def hung_up(fd: int) -> bool:
    """Whether the terminal on `fd` is gone (the tty answers EIO)."""
    try:
        termios.tcgetattr(fd)
    except (termios.error, OSError):
        return True
    return False


def exit_soon(code: int, seconds: float) -> None:
    """End the process after `seconds` whatever it is doing: the backstop for a
    dashboard whose terminal is gone (putting a dead tty back may hang)."""
    backstop = threading.Timer(seconds, os._exit, (code,))
    backstop.daemon = True
    backstop.start()
