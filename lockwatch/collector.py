"""The cyclic garbage collector, held off while many small objects are made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection while the block runs.

    Making tens of thousands of small objects that all survive (a change set
    encoded or decoded, a scan's locks unpickled) sets off the collector every few
    hundred of them, and some of its passes walk the whole heap: more than double
    the time on a large board. Those objects hold no cycles, so this only defers
    collections: the next pass catches up. A collector someone else has turned off
    stays off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# What a one-shot command is done with, kept to its end: the console script's
# `ls` leaves with os._exit, which frees nothing, while freeing a scan's tens of
# thousands of locks, records and their parts one object at a time was a tenth
# of its work. Only ever filled when `keep_to_exit` was called (cli/ls.py, in
# the console script alone): anywhere else `left` keeps nothing.
_KEPT: list[object] = []
_KEEPING: list[bool] = []


def keep_to_exit() -> None:
    """From now on, `left` keeps what it is handed until the process ends: for a
    command that leaves with os._exit (and its forked workers, which do too)."""
    _KEEPING.append(True)


def left(*objects: object) -> None:
    """The caller is done with `objects`: freed as usual, or, after
    `keep_to_exit`, kept for the exit to drop whole."""
    if _KEEPING:
        _KEPT.append(objects)
