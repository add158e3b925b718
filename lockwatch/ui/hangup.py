"""The terminal going away (an SSH drop, tmux killed) ends the dashboard rather
than leaving it drawing into nothing at full CPU."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable

from textual.app import App

from lockwatch.tty import CHECK_SECONDS, hung_up, tty_fd


def watch_terminal(app: App[None], gone: Callable[[str], None]) -> None:
    """Call `gone(why)` on SIGHUP, or when the tty answers EIO (a process that
    ignores SIGHUP, say under nohup)."""
    fd = tty_fd()
    if fd is not None:

        def check() -> None:
            if hung_up(fd):
                gone("its tty answers EIO")

        app.set_interval(CHECK_SECONDS, check)
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, gone, "SIGHUP")
