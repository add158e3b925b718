"""PostgreSQL for the integration tests: a server to poll, and sessions to contend on it.

Where the server comes from, in order:

1. `LOCKWATCH_TEST_PG_DSN`, default postgresql://postgres@127.0.0.1:5432/postgres;
2. when nothing answers there, a throwaway embedded server from the `pgserver` package;
3. otherwise the tests skip with the reason, or fail with it when `LOCKWATCH_REQUIRE_PG=1` (CI).

Each test run works in a private database created on that server (advisory keys are per
database, so nobody else's locks can get in the way), and each test gets a `PgHarness`: an
admin connection, extra autocommit sessions, statements left blocked in background
threads, unique tables. Everything a test opens is terminated, joined and dropped at
teardown, whether the test passed or not.

`throwaway_cluster` starts a private cluster with initdb/pg_ctl (as the `postgres` OS user
when running as root) with max_prepared_transactions > 0, for prepared transactions and
for stopping and restarting a server under a running source.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import psycopg
import pytest
from psycopg import conninfo, sql

from lockwatch.sources.postgres.dsn import display_name, scrub
from lockwatch.sources.postgres.source import PgSnapshot, PgSource

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECT_TIMEOUT_S = 3
# Every condition wait is bounded by this; healthy runs need a fraction of it.
WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
POLL_INTERVAL_S = 0.01


# --------------------------------------------------------------------------- availability


def unavailable(reason: str) -> NoReturn:
    """Skip with `reason`, or fail with it when CI demands a real PostgreSQL."""
    if os.environ.get("LOCKWATCH_REQUIRE_PG") == "1":
        pytest.fail(f"LOCKWATCH_REQUIRE_PG=1 but no PostgreSQL to test against: {reason}")
    pytest.skip(f"no PostgreSQL to test against: {reason}")


def probe(dsn: str) -> str | None:
    """None when a server answers at `dsn`, else why not (without any password)."""
    try:
        with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except (psycopg.Error, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return scrub(first, dsn)
    return None


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A DSN of a PostgreSQL server that answers, or a skip (a failure in CI) saying why."""
    dsn = os.environ.get("LOCKWATCH_TEST_PG_DSN") or DEFAULT_DSN
    problem = probe(dsn)
    if problem is None:
        yield dsn
        return
    reasons = [f"nothing answers at {display_name(dsn)} ({problem})"]
    try:
        from pgserver.postgres_server import get_server
    except ImportError:
        reasons.append(
            "and the pgserver package (embedded fallback, Python < 3.13) is not installed"
        )
    else:
        datadir = tempfile.mkdtemp(prefix="lockwatch-pgserver-")
        server: Any = None
        uri: str | None = None
        try:
            server = get_server(datadir)
            uri = str(server.get_uri())
        except Exception as exc:  # noqa: BLE001 - any failure to start is a reason to report
            reasons.append(f"and pgserver could not start one ({type(exc).__name__}: {exc})")
        if uri is not None:
            problem = probe(uri)
            if problem is not None:
                reasons.append(f"and the pgserver server does not answer ({problem})")
        try:
            if uri is not None and problem is None:
                yield uri
                return
        finally:
            if server is not None:
                with contextlib.suppress(Exception):
                    server.cleanup()
            shutil.rmtree(datadir, ignore_errors=True)
    unavailable("; ".join(reasons))


@pytest.fixture(scope="session")
def pg_db(pg_dsn: str) -> Iterator[str]:
    """A DSN of a database of this test run's own on the `pg_dsn` server, dropped at the end.

    Falls back to `pg_dsn`'s own database when the role may not create databases.
    """
    name = f"lockwatch_test_{uuid.uuid4().hex[:12]}"
    try:
        with connect(pg_dsn, "lw-test-setup") as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error:
        yield pg_dsn
        return
    try:
        yield conninfo.make_conninfo(pg_dsn, dbname=name)
    finally:
        with connect(pg_dsn, "lw-test-setup") as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            wait_until(
                lambda: (
                    not conn.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE datname = %s", (name,)
                    ).fetchone()
                ),
                f"every session to leave database {name}",
            )
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


# --------------------------------------------------------------------------- waiting


def wait_until(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    """Wait, at most `timeout` seconds, until `predicate()` is true; fail saying `what`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(POLL_INTERVAL_S)


async def poll_ok(source: PgSource, timeout: float = WAIT_S) -> PgSnapshot:
    """One poll that must succeed, and must not take longer than `timeout`."""
    snapshot = await asyncio.wait_for(source.poll(), timeout)
    assert snapshot is not None, f"poll failed: {source.status}"
    return snapshot


@contextlib.asynccontextmanager
async def monitor(dsn: str, **options: Any) -> AsyncIterator[PgSource]:
    """A PgSource whose connection is closed when the block ends, however it ends."""
    source = PgSource(dsn, **options)
    try:
        yield source
    finally:
        with contextlib.suppress(psycopg.Error, OSError):
            await source.close()


# --------------------------------------------------------------------------- sessions


def connect(dsn: str, application: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(
        dsn,
        autocommit=True,
        application_name=application,
        connect_timeout=CONNECT_TIMEOUT_S,
    )


def write_and_leave(dsn: str, statement: str, params: Sequence[Any] = ()) -> int:
    """Run `statement` on a connection of its own, close it, and wait until its
    backend is gone; its row count. A closed connection's backend outlives the
    client's goodbye for a moment, idle, its last statement the write: a poll then
    would see a tool at work on a lock table (`tool_running`)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        count = conn.execute(statement, params).rowcount
        writer = conn.info.backend_pid
    with connect(dsn, "lw-test-setup") as admin:
        wait_until(
            lambda: (
                not admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (writer,)
                ).fetchone()
            ),
            f"backend {writer} to exit",
        )
    return count


def terminate(admin: psycopg.Connection[Any], pids: Sequence[int]) -> None:
    """Terminate these backends and wait until they are gone."""
    pids = [pid for pid in pids if pid]
    if not pids:
        return
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
    )
    wait_until(
        lambda: (
            not admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
            ).fetchone()
        ),
        f"backends {pids} to exit",
    )


@contextlib.contextmanager
def extra_sessions(
    admin: psycopg.Connection[Any], dsn: str, *applications: str
) -> Iterator[list[psycopg.Connection[tuple[Any, ...]]]]:
    """Autocommit connections named `applications`; terminated and closed on the way out
    (terminating first, so one stuck in a lock wait or a transaction cannot hold things up)."""
    conns: list[psycopg.Connection[tuple[Any, ...]]] = []
    try:
        for application in applications:
            conns.append(connect(dsn, application))
        yield conns
    finally:
        with contextlib.suppress(psycopg.Error):
            terminate(admin, [conn.info.backend_pid for conn in conns if not conn.closed])
        for conn in conns:
            with contextlib.suppress(psycopg.Error):
                conn.close()


def waiting_on_lock(admin: psycopg.Connection[Any], pid: int) -> bool:
    row = admin.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row[0] == "Lock"


class Blocked:
    """A statement run in a background thread that is (expected to be) waiting on a lock."""

    def __init__(self, conn: psycopg.Connection[Any], query: str) -> None:
        self.conn = conn
        self.query = query
        self.pid = conn.info.backend_pid
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"blocked-{self.pid}", daemon=True)

    def _run(self) -> None:
        try:
            self.conn.execute(self.query)
        except BaseException as exc:  # noqa: BLE001 - kept for the test to look at
            self.error = exc
        finally:
            self.done.set()

    def wait_done(self, timeout: float = WAIT_S) -> None:
        assert self.done.wait(timeout), f"{self.query!r} (pid {self.pid}) still running"
        self.thread.join(timeout)


def start_blocked(
    admin: psycopg.Connection[Any], conn: psycopg.Connection[Any], query: str
) -> Blocked:
    """Run `query` on `conn` in a thread and return once the server says that backend waits
    on a lock (pg_stat_activity.wait_event_type = 'Lock'). Fails if it finishes instead."""
    blocked = Blocked(conn, query)
    blocked.thread.start()
    wait_until(
        lambda: blocked.done.is_set() or waiting_on_lock(admin, blocked.pid),
        f"pid {blocked.pid} to wait on a lock in {query!r}",
    )
    if blocked.done.is_set():
        pytest.fail(f"{query!r} was expected to block but finished: {blocked.error!r}")
    return blocked


@contextlib.contextmanager
def blocking_statement(
    admin: psycopg.Connection[Any], conn: psycopg.Connection[Any], query: str
) -> Iterator[Blocked]:
    """`start_blocked`, then on the way out: terminate the backend if the statement still
    runs, and join the thread."""
    blocked = start_blocked(admin, conn, query)
    try:
        yield blocked
    finally:
        if not blocked.done.is_set():
            with contextlib.suppress(psycopg.Error):
                terminate(admin, [blocked.pid])
        blocked.done.wait(WAIT_S)
        blocked.thread.join(WAIT_S)


# A client program of its own: connects, takes its locks, reports its backends' pids,
# then either runs a long statement on one connection (busy: the server will not
# notice the client is gone) or sleeps with every connection idle.
_CLIENT_PROGRAM = r"""
import json, sys, time
import psycopg
spec = json.loads(sys.argv[2])
conns = []
for app, statements in spec["conns"]:
    conn = psycopg.connect(sys.argv[1], autocommit=True, application_name=app)
    for statement in statements:
        conn.execute(statement)
    conns.append(conn)
print(json.dumps([c.info.backend_pid for c in conns]), flush=True)
then = spec["then"]
if then is None:
    time.sleep(3600)
conns[then[0]].execute(then[1])
time.sleep(3600)
"""


class ClientProcess:
    """A client program in a process of its own (`PgHarness.client_process`)."""

    def __init__(self, process: subprocess.Popen[str], backends: list[int]) -> None:
        self.process = process
        self.pid = process.pid
        self.backends = backends

    def kill(self) -> None:
        """SIGKILL: its sockets close, its backends live on until they notice."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(WAIT_S)


class PgHarness:
    """One test's view of a server: an admin connection plus whatever the test opens,
    all of it cleaned up by `close()`."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.tag = uuid.uuid4().hex[:10]
        self._stack = contextlib.ExitStack()
        self.admin = self._stack.enter_context(connect(dsn, f"lw-test-admin-{self.tag}"))
        # Teardown must never hang behind a lock a broken test left behind.
        self.admin.execute("SET lock_timeout = '5s'")
        self.dbname = str(self.scalar("SELECT current_database()"))
        self.user = str(self.scalar("SELECT current_user"))
        self.server_version = self.admin.info.server_version

    def scalar(self, query: str | sql.Composed, params: Sequence[Any] = ()) -> Any:
        row = self.admin.execute(query, params).fetchone()
        assert row is not None, f"no row from {query!r}"
        return row[0]

    def sessions(self, *roles: str) -> list[psycopg.Connection[tuple[Any, ...]]]:
        """Extra autocommit sessions, named `lw-<role>-<tag>` in pg_stat_activity."""
        return self._stack.enter_context(
            extra_sessions(self.admin, self.dsn, *(self.application(r) for r in roles))
        )

    def session(self, role: str) -> psycopg.Connection[tuple[Any, ...]]:
        return self.sessions(role)[0]

    def application(self, role: str) -> str:
        return f"lw-{role}-{self.tag}"

    def block(self, conn: psycopg.Connection[Any], query: str) -> Blocked:
        return self._stack.enter_context(blocking_statement(self.admin, conn, query))

    def login_role(self, name: str, password: str | None = None) -> str:
        """A LOGIN role of this test's own with no privileges granted; its DSN.
        Its sessions are ended and the role dropped at teardown."""
        role = f"lw_{name}_{self.tag}"
        create = sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role))
        if password is not None:
            create = sql.SQL("{} PASSWORD {}").format(create, sql.Literal(password))
        self.admin.execute(create)

        def drop() -> None:
            self.admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            wait_until(
                lambda: (
                    not self.admin.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE usename = %s", (role,)
                    ).fetchone()
                ),
                f"sessions of {role} to exit",
            )
            self.admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))

        self.defer(drop)
        return conninfo.make_conninfo(self.dsn, user=role, password=password)

    def client_process(
        self,
        *conns: tuple[str, Sequence[str]],
        then: tuple[int, str] | None = None,
        dsn: str | None = None,
    ) -> ClientProcess:
        """A program in a process of its own, the client of its own sessions: one
        connection per (role, statements), named `lw-<role>-<tag>`; then it runs
        `then` = (connection index, statement) and stays there, or (None) idles.
        Killed, and its backends terminated, at teardown."""
        import json
        import sys

        spec = {"conns": [(self.application(r), list(st)) for r, st in conns], "then": then}
        process = subprocess.Popen(
            [sys.executable, "-c", _CLIENT_PROGRAM, dsn or self.dsn, json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        client = ClientProcess(process, [])

        def stop() -> None:
            client.kill()
            terminate(self.admin, client.backends)
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()

        self.defer(stop)
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            error = process.stderr.read() if process.stderr else ""
            pytest.fail(f"the client program failed: {error[-2000:]}")
        client.backends = [int(pid) for pid in json.loads(line)]
        if then is not None:
            backend = client.backends[then[0]]
            wait_until(
                lambda: self.admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'active'"
                    " AND query = %s",
                    (backend, then[1]),
                ).fetchone(),
                f"pid {backend} to run {then[1]!r}",
            )
        return client

    def defer(self, callback: Callable[[], object]) -> None:
        """Run `callback` at teardown (before anything opened earlier is closed)."""

        def run() -> None:
            with contextlib.suppress(psycopg.Error):
                callback()

        self._stack.callback(run)

    def table(self, rows: int = 1) -> str:
        """A fresh table `lw_<uuid>(id int primary key, v int)` with rows 1..rows."""
        name = f"lw_{uuid.uuid4().hex[:16]}"
        ident = sql.Identifier(name)
        self.admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, v int)").format(ident))
        self.admin.execute(
            sql.SQL("INSERT INTO {} SELECT g, 0 FROM generate_series(1, %s) AS g").format(ident),
            (rows,),
        )
        self.defer(lambda: self.admin.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident)))
        return name

    def activity(self, pid: int, *columns: str) -> tuple[Any, ...]:
        row = self.admin.execute(
            sql.SQL("SELECT {} FROM pg_stat_activity WHERE pid = %s").format(
                sql.SQL(", ").join(sql.SQL(c) for c in columns)
            ),
            (pid,),
        ).fetchone()
        assert row is not None, f"pid {pid} is not in pg_stat_activity"
        return tuple(row)

    def wait_state(self, pid: int, state: str, longer_than: float = 0.0) -> None:
        """Wait until `pid` is in `state` and has been for more than `longer_than` seconds
        by the server's clock (pg_stat_activity.state_change)."""
        wait_until(
            lambda: self.admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = %s"
                " AND clock_timestamp() - state_change > make_interval(secs => %s)",
                (pid, state, longer_than),
            ).fetchone(),
            f"pid {pid} to be {state!r} for more than {longer_than}s",
        )

    def close(self) -> None:
        self._stack.close()


@pytest.fixture
def pg(pg_db: str) -> Iterator[PgHarness]:
    harness = PgHarness(pg_db)
    try:
        yield harness
    finally:
        harness.close()


# --------------------------------------------------------------------------- a private cluster


@dataclass
class Cluster:
    """A PostgreSQL cluster of the test run's own, owned by `owner`."""

    bindir: Path
    root: Path
    port: int
    owner: pwd.struct_passwd | None  # run the binaries as this OS user (when we are root)

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def logfile(self) -> Path:
        return self.root / "server.log"

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / program), *args]
        if self.owner is not None:
            command = ["runuser", "-u", self.owner.pw_name, "--", *command]
        done = subprocess.run(
            command, cwd=self.root, capture_output=True, text=True, timeout=60, check=False
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{program} {' '.join(args)} exited {done.returncode}:"
                f" {(done.stderr or done.stdout).strip()[-2000:]}"
            )
        return done

    def start(self) -> None:
        self.run(
            "pg_ctl", "-D", str(self.datadir), "-l", str(self.logfile), "-w", "-t", "30", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "-t", "30", "stop")

    def log_tail(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-2000:]
        except OSError:
            return ""


def find_bindir() -> Path | None:
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(Path(out.stdout.strip()))

    def major(path: str) -> int:
        version = Path(path).parent.name
        return int(version) if version.isdigit() else 0

    candidates += [
        Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=major, reverse=True)
    ]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def throwaway_cluster() -> Iterator[Cluster]:
    """A private cluster on a free 127.0.0.1 port: trust auth, max_prepared_transactions=5.
    Stopped and removed at the end of the run."""
    bindir = find_bindir()
    if bindir is None:
        unavailable("no initdb/pg_ctl found (pg_config --bindir, /usr/lib/postgresql/*/bin)")
    owner = None
    if os.geteuid() == 0:
        # initdb refuses to run as root: the cluster belongs to the postgres OS user.
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and there is no `postgres` OS user to own a cluster")
        if shutil.which("runuser") is None:
            unavailable("running as root and `runuser` is missing")
    root = Path(tempfile.mkdtemp(prefix="lockwatch-cluster-"))
    if owner is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    cluster = Cluster(bindir=bindir, root=root, port=free_port(), owner=owner)
    started = False
    try:
        try:
            cluster.run(
                "initdb", "-D", str(cluster.datadir), "-U", "postgres", "-A", "trust",
                "-E", "UTF8", "--no-locale", "--no-sync",
            )  # fmt: skip
            with (cluster.datadir / "postgresql.conf").open("a") as conf:
                conf.write(
                    "\n# lockwatch tests\n"
                    f"port = {cluster.port}\n"
                    "listen_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{cluster.root}'\n"
                    "max_prepared_transactions = 5\n"
                    "max_connections = 40\n"
                    "fsync = off\n"
                    "synchronous_commit = off\n"
                    "full_page_writes = off\n"
                )
            cluster.start()
            started = True
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            unavailable(
                f"could not start a throwaway cluster with {bindir}: {exc} {cluster.log_tail()}"
            )
        problem = probe(cluster.dsn)
        if problem is not None:
            unavailable(f"the throwaway cluster does not answer: {problem} {cluster.log_tail()}")
        yield cluster
    finally:
        if started or (cluster.datadir / "postmaster.pid").exists():
            with contextlib.suppress(OSError, RuntimeError, subprocess.SubprocessError):
                cluster.stop(mode="immediate")
        shutil.rmtree(root, ignore_errors=True)
