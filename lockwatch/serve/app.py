"""`lockwatch serve`, put together: check where to listen and who may read,
bind, start collecting, answer until SIGTERM (or SIGINT), then stop cleanly."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING

from lockwatch.clock import Clock, SystemClock
from lockwatch.serve.access import Access
from lockwatch.serve.settings import ServeSettings

if TYPE_CHECKING:
    from lockwatch.history.recorder import Recorder
    from lockwatch.serve.clients import ClientErrors
    from lockwatch.serve.http import Endpoints
    from lockwatch.serve.watcher import Watcher
    from lockwatch.sources.feed import Feed

EXIT_USAGE = 2
# How long serve waits for every source's first report before it answers anyway.
READY_WAIT_SECONDS = 10.0


class ServeError(Exception):
    """What keeps the server from starting, in words; exit 2."""


@dataclass(frozen=True)
class Plan:
    """What serve will do, all checked before anything starts."""

    host: str
    port: int
    family: int
    loopback: bool
    access: Access
    url: str


def plan(settings: ServeSettings) -> Plan:
    from lockwatch.serve.listen import ListenError, family, loopback_only, parse_listen
    from lockwatch.sources.secrets import TokenFileError, read_token

    try:
        listen = parse_listen(settings.listen)
        loopback = loopback_only(listen.host)
        address_family = family(listen.host)
    except ListenError as exc:
        raise ServeError(f"--listen: {exc}") from None
    token = None
    if settings.token_file:
        try:
            token = read_token(settings.token_file)
        except TokenFileError as exc:
            raise ServeError(f"--token-file: {exc}") from None
        if _readable_by_others(settings.token_file):
            print(
                f"lockwatch serve: warning: {settings.token_file} is readable by every user;"
                " chmod 600 it",
                file=sys.stderr,
            )
    if token is None and not loopback:
        raise ServeError(
            f"listening on {settings.listen} lets other hosts in: give a token"
            " (--token-file FILE, or serve.token_file in the config); /v1/locks shows every"
            " lock's holder and query. Or listen on 127.0.0.1."
        )
    access = Access(token, settings.open_metrics)
    return Plan(listen.host, listen.port, address_family, loopback, access, listen.url())


def connections_allowed(wanted: int = 4096) -> int:
    """How many client connections the listener may hold: `wanted`, with the
    soft limit on open files raised for them (as far as the hard one allows)
    and room left for the sources' own files and sockets."""
    import resource

    spare = 512  # lock trees' watches, servers' connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Twice: a burst is accepted (up to the backlog) before the cap makes room.
    needed = wanted * 2 + spare
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(16, min(wanted, (soft - spare) // 2))


def _readable_by_others(path: str) -> bool:
    try:
        return bool(os.stat(os.path.expanduser(path)).st_mode & 0o004)
    except OSError:
        return False


def run(
    feeds: Sequence[tuple[str, Feed]],
    settings: ServeSettings,
    *,
    host: str,
    clock: Clock | None = None,
    describe: str = "",
    recorder: Recorder | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT; the exit status. `feeds`: (source name,
    Feed) for every selected source."""
    import socket

    from lockwatch.serve.clients import ClientErrors
    from lockwatch.serve.http import Limits, Server
    from lockwatch.serve.pace import Pace
    from lockwatch.serve.watcher import Watcher

    the_plan = plan(settings)
    clock = clock or SystemClock()
    # While recording, the feeds poll at --refresh whoever scrapes: a stall
    # nobody scraped for is what the history is for.
    pace = None if recorder is not None else Pace()
    watcher = Watcher(feeds, host=host, clock=clock, pace=pace, recorder=recorder)
    errors = ClientErrors()
    endpoints = _endpoints(watcher, the_plan, settings, host, clock, errors, recorder)
    try:
        address = (the_plan.host, the_plan.port)
        limits = Limits(max_connections=connections_allowed())
        server = Server(
            address, socket.AddressFamily(the_plan.family), endpoints, limits=limits, errors=errors
        )
    except OSError as exc:
        raise ServeError(f"cannot listen on {settings.listen}: {exc.strerror or exc}") from None

    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    watcher.start()
    # Bound already (a client that connects now waits in the backlog), answering
    # once every source has reported: the first answers have data in them.
    ready_by = time.monotonic() + READY_WAIT_SECONDS
    while not watcher.health()[0] and time.monotonic() < ready_by and not stopping.is_set():
        time.sleep(0.05)
    answering = threading.Thread(target=server.serve_forever, name="lockwatch-http", daemon=True)
    answering.start()
    print(_listening(the_plan, server.port, describe), file=sys.stderr, flush=True)
    said: str | None = None
    try:
        while not stopping.wait(0.5):
            said = _say_recording_stopped(recorder, said)
    finally:
        server.shutdown()
        server.server_close()
        watcher.stop()
        if recorder is not None:
            recorder.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _say_recording_stopped(recorder, said)
    print("lockwatch serve: stopped", file=sys.stderr, flush=True)
    return 0


def _endpoints(
    watcher: Watcher,
    the_plan: Plan,
    settings: ServeSettings,
    host: str,
    clock: Clock,
    errors: ClientErrors,
    recorder: Recorder | None = None,
) -> Endpoints:
    """What the server answers: the metrics of the watcher's board (and of the
    listener and the process), the locks document, the health, and the history
    while recording."""
    from prometheus_client import CollectorRegistry, ProcessCollector
    from prometheus_client.exposition import choose_encoder

    from lockwatch.serve.clients import ListenerCollector
    from lockwatch.serve.document import Documents
    from lockwatch.serve.http import Endpoints
    from lockwatch.serve.metrics import BoardCollector

    registry = CollectorRegistry(auto_describe=False)
    collector = BoardCollector(watcher, max_series=settings.max_lock_series)
    registry.register(collector)
    registry.register(ListenerCollector(errors))
    ProcessCollector(registry=registry)

    def metrics(accept: str | None) -> tuple[bytes, str]:
        watcher.asked()
        encoder, content_type = choose_encoder(accept or "")
        return encoder(registry), content_type

    documents = Documents(watcher, host)

    def locks() -> bytes:
        watcher.asked()
        return documents.get(clock.now())

    answer_history = None
    if recorder is not None:
        from lockwatch.serve.history import history_answer

        answer_history = history_answer(recorder.target, clock)
    return Endpoints(the_plan.access, metrics, locks, watcher.health, answer_history)


def _listening(the_plan: Plan, port: int, describe: str) -> str:
    """The line saying where it listens, what it serves and how it is guarded."""
    bound = the_plan.url.rsplit(":", 1)[0] + f":{port}"
    guarded = "open" if the_plan.access.token is None else "token required"
    if the_plan.access.token is not None and the_plan.access.open_metrics:
        guarded = "token required for /v1/locks; /metrics open"
    return f"lockwatch serve: listening on {bound} (/metrics, /v1/locks, /healthz; {guarded})" + (
        f"; watching {describe}" if describe else ""
    )


def _say_recording_stopped(recorder: Recorder | None, said: str | None) -> str | None:
    """One line on stderr when the history stops being recorded (a store that
    cannot be opened, a full disk): watching goes on, and a service's log says
    why its history has a hole. Returns what has been said."""
    failed = None if recorder is None else recorder.failed
    if failed is not None and failed != said:
        print(f"lockwatch serve: {failed}", file=sys.stderr, flush=True)
        return failed
    return said
