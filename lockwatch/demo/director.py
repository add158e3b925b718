"""`Demo`: the whole show as a context manager.

    with Demo() as demo:            # workspace, children, PostgreSQL contention
        app = build_app(demo.roots, demo.dsns, demo.config, ...)
        app.run()
    # every child stopped and reaped, sessions ended, server and workspace removed

Entering starts, in order: the workspace, the guardian, the children (so that their
clocks start as early as possible: the hanging executor's lock must be stale on screen
within 10 s), a timer that SIGKILLs one holder a few seconds in, then PostgreSQL. A
failure on the way in undoes whatever had started before it re-raises. Leaving stops
everything whatever ended the block (a quit, Ctrl+C, an exception in the UI), with
Ctrl+C ignored meanwhile so that a second one cannot cut the cleanup short.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from lockwatch.config import Config
from lockwatch.demo import workspace as ws
from lockwatch.demo.cast import KILLED, cast, clocks, killed_lock, readme
from lockwatch.demo.pg_server import EmbeddedServer, pgserver_problem
from lockwatch.demo.postgres import (
    IDLE_AFTER_S,
    AdvisoryPlan,
    Contention,
    PgSetupError,
    advisory_plan,
    probe,
)
from lockwatch.demo.supervisor import Child, Guardian, Supervisor

KILL_AFTER_S = 3.0
CLOCKS_WAIT_S = 3.0
REFRESH_S = 1.0  # Postgres polled every second: the demo is about watching things move


class DemoError(Exception):
    """The demo could not start: why, in words for the operator."""


@dataclass(frozen=True, slots=True)
class PgInfo:
    """What the demo runs on PostgreSQL."""

    embedded: bool
    server: str  # user@host:port/dbname, never a password
    table: str
    application: str  # the prefix of every session's application_name
    sessions: int
    postmaster_pid: int | None
    datadir: Path | None  # the embedded server's, removed on exit


class Demo:
    def __init__(
        self,
        *,
        pg_dsn: str | None = None,
        embedded_pg: bool = True,
        keep: bool = False,
        audit_log: Path | None = None,
        base_dir: Path | None = None,
        kill_after: float = KILL_AFTER_S,
        say: Callable[[str], None] | None = None,
    ) -> None:
        """`pg_dsn`: contend on that server (only the demo's own table and sessions);
        else an embedded server when `embedded_pg` and pgserver is there; else files
        only (`pg_missing` says why). `audit_log` defaults to the workspace's."""
        self.pg_dsn = pg_dsn
        self.embedded_pg = embedded_pg
        self.keep = keep
        self._audit_log = audit_log
        self.base_dir = base_dir
        self.kill_after = kill_after
        self.say = say or (lambda message: None)
        self.tag = secrets.token_hex(4)
        self.workspace: ws.Workspace | None = None
        self.config = Config()
        self.pg_info: PgInfo | None = None
        self.pg_missing: str | None = None
        self.killed: int | None = None  # the pid SIGKILLed mid-run, once it was
        self.report: list[str] = []  # what leaving did, for the operator
        self.pg_idle_after = IDLE_AFTER_S
        self.refresh = REFRESH_S
        self._supervisor: Supervisor | None = None
        self._guardian: Guardian | None = None
        self._server: EmbeddedServer | None = None
        self._contention: Contention | None = None
        self._dsn: str | None = None
        self._timer: threading.Thread | None = None
        self._stopping = threading.Event()
        self._started_at = 0.0
        self._stopped = False

    # -- what the dashboard needs ----------------------------------------------------

    @property
    def roots(self) -> tuple[str, ...]:
        return (str(self._ws.systems),)

    @property
    def dsns(self) -> tuple[str, ...]:
        return (self._dsn,) if self._dsn is not None else ()

    @property
    def audit_log(self) -> Path:
        return self._audit_log if self._audit_log is not None else self._ws.audit_log

    @property
    def children(self) -> list[Child]:
        return list(self._supervisor.children) if self._supervisor else []

    @property
    def pids(self) -> list[int]:
        """Every process the demo started: its children, the guardian, the embedded
        server's postmaster."""
        found = [child.pid for child in self.children]
        if self._guardian is not None:
            found.append(self._guardian.pid)
        if self.pg_info is not None and self.pg_info.postmaster_pid is not None:
            found.append(self.pg_info.postmaster_pid)
        return found

    @property
    def _ws(self) -> ws.Workspace:
        if self.workspace is None:
            raise RuntimeError("the demo has not started")
        return self.workspace

    def describe(self) -> str:
        """One line for the operator before the dashboard takes the screen."""
        count = len(self.children)
        if self.pg_info is not None:
            where = "an embedded server" if self.pg_info.embedded else self.pg_info.server
            pg = f"PostgreSQL: {self.pg_info.sessions} sessions on {where}"
        else:
            pg = "files only (no PostgreSQL)"
        return (
            f"lockwatch demo: {count} processes taking locks in {self._ws.root}; {pg};"
            " q quits and cleans up."
        )

    # -- in and out ----------------------------------------------------------------------

    def __enter__(self) -> Demo:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start everything; on any failure, stop what had started and re-raise
        (PgSetupError: the named server; DemoError: the machine, e.g. no temp dir)."""
        try:
            self._start()
        except OSError as exc:
            self.stop()
            raise DemoError(f"cannot start the demo: {exc}") from exc
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        if self.pg_dsn is not None:
            # A server that does not answer is the operator's mistake: say so before
            # anything starts.
            problem = probe(self.pg_dsn)
            if problem is not None:
                raise PgSetupError(f"cannot connect: {problem}")
        workspace = self.workspace = ws.create(self.base_dir)
        self._supervisor = Supervisor(workspace)
        self._guardian = Guardian(self._supervisor)
        self._guardian.tell(workspace=str(workspace.root), keep=self.keep)
        self._started_at = time.monotonic()
        for role in cast(workspace):
            child = self._supervisor.start(role)
            self._guardian.tell(child=child.pid)
        self._timer = threading.Thread(target=self._kill_one, name="demo-kill", daemon=True)
        self._timer.start()
        plan = self._start_postgres()
        ws.write_text(workspace.readme, readme(workspace, self.audit_log, self.pg_info is not None))
        if plan is not None:
            embedded = self.pg_info is not None and self.pg_info.embedded
            toml = plan.config_toml(
                dsn=self._dsn if embedded else None, idle_after=self.pg_idle_after
            )
            ws.write_text(workspace.config_file, toml)
            from lockwatch.sources.registry import load_config

            self.config = load_config(workspace.config_file)

    def _await(self, locks: list[Path], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not all(lock.exists() for lock in locks) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _start_postgres(self) -> AdvisoryPlan | None:
        from lockwatch.sources.postgres.dsn import display_name

        assert self._guardian is not None
        if self.pg_dsn is not None:
            dsn = self.pg_dsn
            plan = advisory_plan(self.tag)
            embedded = False
        elif self.embedded_pg and (missing := pgserver_problem()) is not None:
            self.pg_missing = missing
            return None
        elif self.embedded_pg:
            self.say("lockwatch demo: starting an embedded PostgreSQL (pgserver)...")
            # Setting up a server is CPU-hungry: let the children whose clocks count
            # start first (on two cores, seventeen children and initdb compete).
            self._await(clocks(self._ws), CLOCKS_WAIT_S)
            guardian = self._guardian
            try:
                self._server = EmbeddedServer.start(
                    announce=lambda datadir: guardian.tell(datadir=str(datadir))
                )
            except PgSetupError as exc:
                self.pg_missing = str(exc)
                return None
            guardian.tell(postmaster=self._server.postmaster_pid)
            dsn = self._server.dsn
            plan = advisory_plan(None)
            embedded = True
        else:
            self.pg_missing = "no server was asked for"
            return None
        contention = self._contention = Contention(dsn, tag=self.tag, plan=plan)
        if not embedded:
            self._guardian.tell(dsn=dsn, application=contention.prefix, table=contention.table)
        try:
            contention.start()
        except PgSetupError as exc:
            if not embedded:
                raise  # the operator's server: their problem to hear about
            # Our own server misbehaving must not cost the operator the file demo.
            self.pg_missing = f"the embedded PostgreSQL failed: {exc}"
            self._contention = None
            contention.stop()
            self._close_server()
            self._server = None
            return None
        self._dsn = dsn
        self.pg_info = PgInfo(
            embedded=embedded,
            server=display_name(dsn),
            table=contention.table,
            application=contention.prefix,
            sessions=contention.sessions,
            postmaster_pid=self._server.postmaster_pid if self._server else None,
            datadir=self._server.datadir if self._server else None,
        )
        return plan

    def _kill_one(self) -> None:
        """SIGKILL the nightly clawdbot session mid-operation, once it holds its lock:
        its lock stays behind with a dead pid (stale), for the operator to break."""
        assert self._supervisor is not None and self.workspace is not None
        lock = killed_lock(self.workspace)
        deadline = self._started_at + self.kill_after
        while not self._stopping.wait(0.05):
            if time.monotonic() >= deadline and lock.exists():
                self.killed = self._supervisor.kill(KILLED)
                return

    def stop(self) -> None:
        """Stop everything started so far; safe to call twice. What it did goes to
        `report`; problems are reported, never raised (there may be more to stop)."""
        if self._stopped:
            return
        self._stopped = True
        with _no_interrupts():
            self._stop()

    def _stop(self) -> None:
        problems: list[str] = []
        self._stopping.set()
        if self._timer is not None:
            self._timer.join()
        stopped = 0
        if self._supervisor is not None:
            stopped = len(self._supervisor.children)
            problems += self._attempt("stop the children", self._supervisor.stop)
        if self._contention is not None:
            problems += self._attempt("end the PostgreSQL sessions", self._contention.stop)
        if self._server is not None:
            problems += self._attempt("stop the embedded PostgreSQL", self._close_server)
        self.report.append(self._summary(stopped))
        if self.workspace is not None:
            audited = self.audit_log.exists()
            if self.keep:
                self.report.append(f"lockwatch demo: workspace kept: {self.workspace.root}")
            else:
                ws.remove(self.workspace)
            self.report.append(self._audit_note(audited))
        if self._guardian is not None:
            problems += self._guardian.dismiss()
        self.report += [f"lockwatch demo: could not {problem}" for problem in problems]

    def _close_server(self) -> list[str]:
        assert self._server is not None
        self._server.close()
        return []

    @staticmethod
    def _attempt(what: str, step: Callable[[], list[str]]) -> list[str]:
        try:
            return [f"{what}: {p}" for p in step() if p]
        except Exception as exc:  # noqa: BLE001 - the next step must still run
            return [f"{what}: {type(exc).__name__}: {exc}"]

    def _summary(self, children: int) -> str:
        parts = [f"stopped {children} processes"]
        if self.pg_info is not None:
            parts.append(f"ended {self.pg_info.sessions} PostgreSQL sessions")
            parts.append(
                "removed the embedded server"
                if self.pg_info.embedded
                else f"dropped table {self.pg_info.table} on {self.pg_info.server}"
            )
        if self.workspace is not None and not self.keep:
            parts.append("removed the workspace")
        return "lockwatch demo: " + ", ".join(parts) + "."

    def _audit_note(self, audited: bool) -> str:
        log = self.audit_log
        if not audited:
            return f"lockwatch demo: nothing was broken or stolen: nothing audited in {log}."
        inside = self.workspace is not None and log.is_relative_to(self.workspace.root)
        if inside and not self.keep:
            return (
                "lockwatch demo: the audit log went with the workspace;"
                " --keep or --audit-log FILE keeps it."
            )
        return f"lockwatch demo: audit log: {log} (see it: lockwatch audit --audit-log {log})"


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Ignore Ctrl+C while cleaning up (only the main thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
