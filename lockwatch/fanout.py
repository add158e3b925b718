"""Run independent slices of work on every core with fork, results in order."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import gc
import io
import math
import operator
import os
import pickle
import select
import signal
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from lockwatch import collector

S = TypeVar("S")
R = TypeVar("R")


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
    children: list[_Child] = []
    try:
        for index in range(1, len(slices)):
            children.append(_spawn(index, slices[index], work))
        results = [work(slices[0])]
        for child in children:
            result = _result_of(child)
            results.append(work(slices[child.index]) if result is _FAILED else result)
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


_FAILED: Any = object()


def _result_of(child: _Child) -> Any:
    """What `child` sent, unpickled as it is read from the pipe (a scan's slice
    sends megabytes of JSON: read whole first, then unpickled, it was copied
    twice more, and each copy's fresh pages faulted in); _FAILED when it could
    not be forked, failed, died or sent something unreadable."""
    result = _FAILED
    if child.pipe is not None:
        with os.fdopen(child.pipe, "rb") as pipe:
            child.pipe = None
            try:
                result = pickle.load(pipe)
            except (pickle.UnpicklingError, EOFError, ValueError):
                result = _FAILED
    ok = False
    if child.pid is not None:
        _, status = os.waitpid(child.pid, 0)
        child.pid = None
        ok = os.waitstatus_to_exitcode(status) == 0
    return result if ok else _FAILED


def _spawn(index: int, piece: S, work: Callable[[S], R]) -> _Child:
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # out of processes or memory: the slice is done here instead
        os.close(read_end)
        os.close(write_end)
        return _Child(index, None, None)
    if pid == 0:  # the child: compute, send, and leave without running atexit hooks
        os.close(read_end)
        _child_collector()
        status = 1
        try:
            result = work(piece)
            # Pickled into the pipe as it goes: a large bytes object is written
            # as it is, never copied into one whole pickle first.
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(result, pipe, protocol=pickle.HIGHEST_PROTOCOL)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return _Child(index, pid, read_end)


# -- streamed: each child hands its results back piece by piece ----------------------

# A frame: its length (8 bytes, big-endian), then a pickle. Length 0 ends a child's
# stream: without it (a crash, a kill), the child's slice is done again here.
_HEADER = struct.Struct("!Q")
_END = _HEADER.pack(0)
_READ_BYTES = 1 << 20
_MIN_READ = 1 << 16
# What one take() reads at most before it hands over what it has.
_BATCH_BYTES = 8 << 20
# Pipes this large (where the system allows) let a child run ahead of the parent.
_PIPE_BYTES = 1 << 20
# How long the read-ahead waits for a child at a time: `take` waits no longer.
_AHEAD_WAIT_MS = 20
# What the read-ahead keeps at most (about 100,000 locks): past it, the children
# wait for `take` again, as they would without it.
_AHEAD_BYTES = 64 << 20


class Streamed(Generic[R]):
    """`work(s)` for every slice, each in a forked child that sends back every piece
    `work` yields as soon as it is made; `take()` hands over what has come.

    Pieces come in no particular order between slices. A slice whose child could
    not be forked, failed or died is worked on here instead, a piece per `take()`
    (with `fork=False`, every slice is): every piece of every slice is handed over
    at least once, and a slice redone after its child died may repeat pieces.
    `take` may be called from any one thread at a time; `close` from any.
    """

    def __init__(
        self,
        slices: Sequence[S],
        work: Callable[[S], Iterable[R]],
        *,
        fork: bool = True,
        nice: int = 0,
    ) -> None:
        self._slices = list(slices)
        self._work = work
        self._guard = threading.Lock()
        self._children: dict[int, _Child] = {}  # by the read end of its pipe
        self._buffers: dict[int, bytearray] = {}
        self._local: list[int] = []  # slices to do here, in order
        self._running: Iterator[R] | None = None
        self._closed = False
        # Read ahead (`read_ahead`): children whose pipe was seen closed, and
        # whether `take` has begun (the thread then stops).
        self._ended: set[int] = set()
        self._taking = False
        self.ahead: threading.Thread | None = None
        for index in range(len(self._slices)):
            child = _spawn_stream(index, self._slices[index], work, nice) if fork else None
            if child is None or child.pipe is None:
                self._local.append(index)
            else:
                self._children[child.pipe] = child
                self._buffers[child.pipe] = bytearray()

    @property
    def done(self) -> bool:
        return self._closed or not (self._children or self._local or self._running)

    def take(self, timeout: float | None = None, *, most: int = _BATCH_BYTES) -> list[R] | None:
        """The pieces that have come, waiting up to `timeout` seconds (None: for
        ever) for the first, then taking what else is there up to about `most`
        bytes of them; [] when none came in time, None once all are in."""
        with self._guard:
            self._taking = True
            if self.done:
                return None
            pieces = self._read(0.0 if self._local or self._running else timeout, most)
            if not pieces and (self._local or self._running):
                pieces = self._here()
            return pieces if pieces or not self.done else None

    def read_ahead(self) -> None:
        """Until the first `take`, a thread moves what the children send into this
        process, as bytes (`take` unpickles them). A pipe holds a megabyte, a few
        thousand locks: a child that filled its pipe would wait for a parent busy
        elsewhere (a dashboard loading its UI) instead of scanning on."""
        if self._children and self.ahead is None:
            self.ahead = threading.Thread(target=self._read_ahead, name="lockwatch-read-ahead")
            self.ahead.daemon = True
            self.ahead.start()

    def close(self) -> None:
        """Stop: children still at work are killed, and every one is reaped."""
        with self._guard:
            self._closed = True
            children, self._children = list(self._children.values()), {}
            self._local.clear()
            self._running = None
        for child in children:
            _stop(child)

    # -- here --------------------------------------------------------------------------

    def _here(self) -> list[R]:
        """One piece of the slices worked on here."""
        while True:
            if self._running is None:
                if not self._local:
                    return []
                self._running = iter(self._work(self._slices[self._local.pop(0)]))
            piece = next(self._running, _NOTHING)
            if piece is not _NOTHING:
                return [piece]  # type: ignore[list-item]
            self._running = None

    # -- children ------------------------------------------------------------------------

    def _read(self, timeout: float | None, most: int) -> list[R]:
        """Whole pieces from the children: waiting up to `timeout` for the first (a
        piece larger than a pipe holds comes in several reads), then whatever else
        is there already, up to `most` bytes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pieces: list[R] = []
        read = 0
        # What the read-ahead took in, first: poll() tells nothing of it.
        for fd in [fd for fd, kept in self._buffers.items() if kept or fd in self._ended]:
            if read >= most and pieces:
                break
            read += self._read_child(fd, pieces, max(most - read, _MIN_READ), fresh=False)
        while self._children and (read < most or not pieces):
            if pieces:
                wait: float | None = 0.0
            else:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            poller = select.poll()
            for fd in self._children:
                poller.register(fd, select.POLLIN)
            ready = poller.poll(None if wait is None else math.ceil(wait * 1000))
            for fd, _ in ready:
                read += self._read_child(fd, pieces, max(most - read, _MIN_READ))
            if not ready and (pieces or (deadline is not None and time.monotonic() >= deadline)):
                break
        return pieces

    def _read_child(self, fd: int, pieces: list[R], most: int, *, fresh: bool = True) -> int:
        """What child `fd` sent (up to `most` bytes; with `fresh`, read from its
        pipe now, else only what the read-ahead kept): its whole pieces into
        `pieces`; how many bytes."""
        child = self._children[fd]
        data = b""
        if fresh and fd not in self._ended:
            try:
                data = os.read(fd, min(most, _READ_BYTES))
            except OSError:
                data = b""
            if not data:
                self._ended.add(fd)
            self._buffers[fd] += data
        kept = len(self._buffers[fd])
        finished, short = self._frames(fd, pieces, most)
        taken = kept - len(self._buffers[fd])
        # Closed, and no whole piece left: the pipe closed before the end frame
        # came (the child failed).
        if finished or (fd in self._ended and short):
            del self._children[fd]
            del self._buffers[fd]
            self._ended.discard(fd)
            os.close(fd)
            child.pipe = None
            if not (finished and _reaped_ok(child)):
                self._local.append(child.index)
                _stop(child)
        return max(len(data), taken)

    def _frames(self, fd: int, into: list[R], most: int) -> tuple[bool, bool]:
        """Whole frames out of the child's buffer, about `most` bytes of them:
        (whether its end frame came, whether no whole frame is left)."""
        buffer = self._buffers[fd]
        start = 0
        ended = short = False
        with collector.paused():
            while True:
                if len(buffer) - start < _HEADER.size:
                    short = True
                    break
                (size,) = _HEADER.unpack_from(buffer, start)
                if size == 0:
                    ended = True
                    start += _HEADER.size
                    break
                if len(buffer) - start - _HEADER.size < size:
                    short = True
                    break
                if start >= most:
                    break
                body = start + _HEADER.size
                into.append(pickle.loads(buffer[body : body + size]))
                start = body + size
        del buffer[:start]
        return ended, short

    def _ahead_over(self) -> bool:
        return self._taking or self._closed

    def _read_ahead(self) -> None:
        while True:
            with self._guard:
                if self._ahead_over():
                    return
                fds = [fd for fd in self._children if fd not in self._ended]
                kept = sum(len(buffer) for buffer in self._buffers.values())
            if not fds or kept >= _AHEAD_BYTES:
                return
            poller = select.poll()
            for fd in fds:
                poller.register(fd, select.POLLIN)
            ready = poller.poll(_AHEAD_WAIT_MS)
            with self._guard:
                # Once `take` began, these pipes are its to read (and to close:
                # a number closed may already name another file).
                if self._ahead_over():
                    return
                for fd, _ in ready:
                    try:
                        data = os.read(fd, _READ_BYTES)
                    except OSError:
                        data = b""
                    if data:
                        self._buffers[fd] += data
                    else:
                        self._ended.add(fd)


_NOTHING = object()


class _Pickler(pickle.Pickler):
    """Frozen, slotted dataclasses travel as their constructor's arguments: the
    default for such a class rebuilds each one through `dataclasses.fields()`,
    which made loading a scan's locks twice as slow."""

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        values = _ARGUMENTS.get(cls, _UNKNOWN)
        if values is _UNKNOWN:
            values = _ARGUMENTS[cls] = _arguments(cls)
        if values is None:
            return NotImplemented
        return cls, values(obj)


_UNKNOWN: Any = object()
# Per class: what gives an instance's constructor arguments, or None (pickled the
# default way).
_ARGUMENTS: dict[type, Callable[[Any], tuple[Any, ...]] | None] = {}


def _arguments(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        return None
    fields = dataclasses.fields(cls)
    if not fields or not all(field.init for field in fields):
        return None
    if len(fields) == 1:
        name = fields[0].name
        return lambda obj: (getattr(obj, name),)
    getter: Callable[[Any], tuple[Any, ...]] = operator.attrgetter(*(f.name for f in fields))
    return getter


def _dumps(piece: object) -> bytes:
    out = io.BytesIO()
    out.write(_HEADER.pack(0))  # the length, filled in below
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(piece)
    data = out.getbuffer()
    _HEADER.pack_into(data, 0, len(data) - _HEADER.size)
    return bytes(data)


def _spawn_stream(
    index: int, piece: S, work: Callable[[S], Iterable[R]], nice: int
) -> _Child | None:
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError, AttributeError):  # not Linux, or over pipe-max-size
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    try:
        pid = os.fork()
    except OSError:  # out of processes or memory: the slice is done here instead
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the child: work, send each piece, and leave without atexit hooks
        status = 1
        try:
            os.close(read_end)
            _child_collector()
            if nice:
                os.nice(nice)
            with os.fdopen(write_end, "wb", buffering=0) as pipe:
                for result in work(piece):
                    _write_all(pipe, _dumps(result))
                _write_all(pipe, _END)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return _Child(index, pid, read_end)


def _child_collector() -> None:
    """No cyclic collection in a forked worker. It makes and drops a slice's
    objects (acyclic: refcounting frees them) and exits soon; each collection
    would walk the parent's heap it inherited too, copying the pages it touches.
    Off, a dashboard's scan workers spent a tenth less CPU (10,000 locks)."""
    gc.disable()


def _write_all(pipe: io.RawIOBase, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = pipe.write(view)
        view = view[written or 0 :]


def _reaped_ok(child: _Child) -> bool:
    if child.pid is None:
        return False
    _, status = os.waitpid(child.pid, 0)
    child.pid = None
    return os.waitstatus_to_exitcode(status) == 0


def _stop(child: _Child) -> None:
    if child.pipe is not None:
        os.close(child.pipe)
        child.pipe = None
    if child.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child.pid, 0)
        child.pid = None
