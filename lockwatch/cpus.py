"""How many cores this process may run on, and work spread over them: apart
from fanout.py so that a command that forks nothing (`ls --pg` with one slice of
rows, `ls` of a small tree) does not import the forking machinery (pickle,
signal, select, threading, struct: ~5% of an `ls` of an empty directory)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

S = TypeVar("S")
R = TypeVar("R")


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def spread(slices: Sequence[S], work: Callable[[S], R]) -> list[R]:
    """`[work(s) for s in slices]`: `fanout.fan_out` when there is more than one
    slice, which alone imports it."""
    if len(slices) <= 1:
        return [work(s) for s in slices]
    from lockwatch.fanout import fan_out

    return fan_out(slices, work)
