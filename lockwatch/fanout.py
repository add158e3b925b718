"""Run independent slices of work on every core with fork, results in order."""

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


class _Child:
    __slots__ = ("index", "pid", "pipe")

    def __init__(self, index: int, pid: int | None, pipe: int | None) -> None:
        self.index = index  # which slice it computes
        self.pid = pid  # None: no child (fork failed, or already reaped)
        self.pipe = pipe  # read end of its results, until read


def fan_out(slices: Sequence[S], work: Callable[[S], R]) -> list[R]:
    """`[work(s) for s in slices]`, with every slice but the first in a forked child.

    Results come back pickled, so `work` should return something cheap to pickle
    (bytes and strings, not thousands of objects). A child that cannot be forked,
    fails or dies is redone here, so the answer is always the sequential one, only
    sooner; an error in `work` itself then surfaces here with its traceback. On
    any way out, every pipe is closed and every child reaped.
    """
    if len(slices) <= 1 or not hasattr(os, "fork"):
        return [work(s) for s in slices]
    import pickle

    children: list[_Child] = []
    try:
        for index in range(1, len(slices)):
            children.append(_spawn(index, slices[index], work, pickle.dumps))
        results = [work(slices[0])]
        for child in children:
            data = b""
            if child.pipe is not None:
                with os.fdopen(child.pipe, "rb") as pipe:
                    child.pipe = None
                    data = pipe.read()
            ok = False
            if child.pid is not None:
                _, status = os.waitpid(child.pid, 0)
                child.pid = None
                ok = os.waitstatus_to_exitcode(status) == 0
            if ok:
                try:
                    results.append(pickle.loads(data))
                    continue
                except (pickle.UnpicklingError, EOFError, ValueError):
                    pass
            results.append(work(slices[child.index]))
        return results
    finally:
        # Close every pipe before reaping any child: a later child inherited the
        # earlier children's read ends, so an early child blocked on a full pipe
        # only sees it break once all copies are closed.
        for child in children:
            if child.pipe is not None:
                os.close(child.pipe)
                child.pipe = None
        for child in children:
            if child.pid is not None:
                os.waitpid(child.pid, 0)


def _spawn(index: int, piece: S, work: Callable[[S], R], dumps: Callable[[R], bytes]) -> _Child:
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # out of processes or memory: the slice is done here instead
        os.close(read_end)
        os.close(write_end)
        return _Child(index, None, None)
    if pid == 0:  # the child: compute, send, and leave without running atexit hooks
        os.close(read_end)
        status = 1
        try:
            data = dumps(work(piece))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return _Child(index, pid, read_end)
