"""How a demo child knows to stop: a stop signal, or its parent gone (standard
library only, like the children: see children.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from types import FrameType

SLICE_S = 0.1  # how soon a sleeping child notices it must stop
PR_SET_PDEATHSIG = 1


class Life:
    """Whether to go on: no stop signal came and the parent is still there."""

    def __init__(self, parent: int, pdeathsig: bool) -> None:
        self.parent = parent
        self.stopping = False
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._stop)
        if pdeathsig:
            _set_pdeathsig(signal.SIGTERM)
        # The parent may have died before prctl took effect: `going` checks the pid.

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    @property
    def going(self) -> bool:
        return not self.stopping and os.getppid() == self.parent

    def sleep(self, seconds: float) -> bool:
        """Sleep `seconds` (inf: until stopped); False as soon as it is time to stop."""
        deadline = time.monotonic() + seconds
        while self.going:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(SLICE_S, left))
        return False


def _set_pdeathsig(signum: int) -> None:
    """Linux: the kernel signals us when the thread that started us exits. Only asked
    for when the demo runs in its main thread (a worker thread exiting would kill us)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
