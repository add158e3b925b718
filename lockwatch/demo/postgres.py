"""PostgreSQL contention for the demo, on an embedded throwaway server (pg_server.py)
or one the operator names.

On a named server (`--pg DSN`) the demo touches nothing but what it creates: one
table `lockwatch_demo_<tag>`, and sessions named `lockwatch-demo-<tag>/<role>` in
pg_stat_activity; on exit it ends those sessions and drops the table. Its advisory
keys are derived from the tag there, so they cannot collide with an application's keys.

The sessions (all autocommit, each on its own connection; statements that wait run in
threads):

- advisory, bigint form: `billing-sync` (named through `advisory.strings`) held by a
  working session and awaited by another; `nightly-reindex` (named through
  `advisory.keys`) held by a session that then sits idle (its client, the demo, lives
  on: lockwatch says `active` with `idle_holder` and `client_alive`, not stale);
- advisory, pair form: `agent:42` (namespace named through `advisory.namespaces`) held
  and awaited; an unnamed pair held;
- a row lock: `SELECT ... FOR UPDATE` in a transaction left idle, two sessions waiting
  on that row (PostgreSQL queues the second behind the first: the tree shows a chain);
- a three-deep chain: A holds row 2; B holds row 3 and waits for row 2; C waits for row 3.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from lockwatch.sources.postgres.facts import string_key

if TYPE_CHECKING:
    import psycopg
    from psycopg.abc import Query

    Conn: TypeAlias = psycopg.Connection[tuple[Any, ...]]
    Statement: TypeAlias = Query

APPLICATION = "lockwatch-demo"
TABLE_PREFIX = "lockwatch_demo_"
CONNECT_TIMEOUT_S = 5
SETUP_WAIT_S = 5.0  # for a session to be seen waiting on its lock
WORK_EVERY_S = 2.0  # working holders run a query this often: never idle for long
STOP_WAIT_S = 5.0
# Holders idle (in a transaction) longer than this are flagged on the demo's dashboard
# within seconds rather than after the usual minute; their client (the demo) is alive
# on this host, so lockwatch shows them active with `client_alive`, not stale.
IDLE_AFTER_S = 8.0


class PgSetupError(Exception):
    """The demo could not set up its contention (or start its server): why, in words."""


# --------------------------------------------------------------------------- advisory keys


@dataclass(frozen=True, slots=True)
class AdvisoryPlan:
    """The advisory keys the demo takes, and what lockwatch.toml calls them."""

    billing_sync: int  # bigint form
    reindex: int  # bigint form
    namespace: int  # pair form, first int: named "agent"
    unnamed_pair: tuple[int, int]
    strings: tuple[str, ...]  # advisory.strings
    keys: tuple[tuple[int, str], ...]  # advisory.keys

    def config_toml(self, *, dsn: str | None, idle_after: float) -> str:
        lines = [
            "# Written by `lockwatch demo`: names for the demo's advisory keys.",
            "# While the demo runs, from here: lockwatch ls --config lockwatch.toml systems",
            "",
        ]
        if dsn is not None:
            lines += ["[postgres]", f"dsn = {_toml_string(dsn)}", f"idle_after = {idle_after:g}"]
            lines.append("")
        lines += ["[advisory.namespaces]", f'{self.namespace} = "agent"', ""]
        if self.keys:
            lines.append("[advisory.keys]")
            lines += [f'"{key}" = {_toml_string(name)}' for key, name in self.keys]
            lines.append("")
        lines += ["[advisory]", f"strings = [{', '.join(map(_toml_string, self.strings))}]", ""]
        return "\n".join(lines)


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def advisory_plan(tag: str | None) -> AdvisoryPlan:
    """Fixed, readable keys on the demo's own server (tag None); keys derived from the
    tag on a named server, where an application may use advisory locks of its own."""
    if tag is None:
        return AdvisoryPlan(
            billing_sync=string_key("billing-sync"),
            reindex=8121971372,
            namespace=1,
            unnamed_pair=(7, 1001),
            strings=("billing-sync",),
            keys=((8121971372, "nightly-reindex"),),
        )
    namespace = int(tag[:7], 16) | 1 << 28  # a positive int4 no application picks
    billing = string_key(f"{APPLICATION}:{tag}:billing-sync")
    reindex = string_key(f"{APPLICATION}:{tag}:nightly-reindex")
    return AdvisoryPlan(
        billing_sync=billing,
        reindex=reindex,
        namespace=namespace,
        unnamed_pair=(namespace + 1, 1001),
        strings=(),
        keys=((billing, "billing-sync"), (reindex, "nightly-reindex")),
    )


# --------------------------------------------------------------------------- probing a server


def _first_line(exc: BaseException, dsn: str) -> str:
    from lockwatch.sources.postgres.dsn import scrub

    text = str(exc).strip()
    return scrub(text.splitlines()[0] if text else type(exc).__name__, dsn)


def unusable(dsn: str) -> str | None:
    """Why `--pg DSN` cannot be the demo's server (never with its password);
    None: a server answers there."""
    from psycopg import ProgrammingError, conninfo

    from lockwatch.sources.postgres.dsn import display_name, problem, scrub

    if not dsn.strip():
        return "an empty DSN (an unset variable?)"
    why = problem(dsn)
    if why is not None:
        return why
    try:
        conninfo.conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        return f"not a DSN: {scrub(str(exc), dsn)}"
    why = probe(dsn)
    return None if why is None else f"cannot connect to {display_name(dsn)}: {why}"


def probe(dsn: str) -> str | None:
    """None when a server answers at `dsn`, else why not (never with its password)."""
    import psycopg

    try:
        with psycopg.connect(
            dsn, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True, application_name=APPLICATION
        ) as conn:
            conn.execute("SELECT 1")
    except (psycopg.Error, OSError) as exc:
        return _first_line(exc, dsn)
    return None


# --------------------------------------------------------------------------- sessions


class _Waiter:
    """A statement left waiting on a lock in a thread of its own."""

    def __init__(self, conn: Conn, query: Statement, role: str) -> None:
        self.conn = conn
        self.query = query
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"demo-pg-{role}", daemon=True)

    def _run(self) -> None:
        try:
            self.conn.execute(self.query)
        except BaseException as exc:  # noqa: BLE001 - ended by the demo's own terminate
            self.error = exc
        finally:
            self.done.set()


class Contention:
    """The demo's sessions on one server. `start` sets them up (PgSetupError when it
    cannot); `stop` ends them, drops the table and reports problems instead of raising."""

    def __init__(self, dsn: str, *, tag: str, plan: AdvisoryPlan) -> None:
        self.dsn = dsn
        self.tag = tag
        self.plan = plan
        self.prefix = f"{APPLICATION}-{tag}/"
        self.table = f"{TABLE_PREFIX}{tag}"
        self.server_version = 0
        self._admin: Conn | None = None
        self._conns: list[Conn] = []
        self._working: list[tuple[str, Conn]] = []
        self._waiters: list[_Waiter] = []
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._created = False

    @property
    def sessions(self) -> int:
        return len(self._conns)

    # -- setting up ----------------------------------------------------------------

    def _connect(self, role: str) -> Conn:
        import psycopg

        conn = psycopg.connect(
            self.dsn,
            autocommit=True,
            application_name=f"{self.prefix}{role}",
            connect_timeout=CONNECT_TIMEOUT_S,
        )
        # A server's own timeouts must not end the show early...
        conn.execute("SET idle_in_transaction_session_timeout = 0")
        if conn.info.server_version >= 140000:
            conn.execute("SET idle_session_timeout = 0")
            # ...and if the demo dies, waiting backends notice their client is gone.
            conn.execute("SET client_connection_check_interval = 1000")
        return conn

    def _session(self, role: str, *statements: Statement, working: bool = False) -> Conn:
        conn = self._connect(role)
        self._conns.append(conn)
        for statement in statements:
            conn.execute(statement)
        if working:
            self._working.append((role, conn))
        return conn

    def _wait_on(self, conn: Conn, role: str, query: Statement) -> None:
        """Run `query` on `conn` in a thread; return once the server says it waits."""
        waiter = _Waiter(conn, query, role)
        self._waiters.append(waiter)
        pid = conn.info.backend_pid
        admin = self._admin
        assert admin is not None, "set up first"
        waiter.thread.start()
        deadline = time.monotonic() + SETUP_WAIT_S
        while not waiter.done.is_set():
            row = admin.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if row is not None and row[0] == "Lock":
                return
            if time.monotonic() > deadline:
                raise PgSetupError(f"session {role} did not start waiting on its lock")
            time.sleep(0.01)
        raise PgSetupError(f"session {role} was meant to wait but finished: {waiter.error}")

    def _waiter(self, role: str, query: Statement) -> None:
        self._wait_on(self._session(role), role, query)

    def start(self) -> None:
        import psycopg

        try:
            self._setup()
        except psycopg.Error as exc:
            problem = _first_line(exc, self.dsn)
            raise PgSetupError(f"setting up the demo's sessions: {problem}") from exc

    def _setup(self) -> None:
        import psycopg
        from psycopg import sql

        def advisory(*keys: int) -> sql.Composed:
            args = sql.SQL(", ").join(sql.Literal(key) for key in keys)
            return sql.SQL("SELECT pg_advisory_lock({})").format(args)

        t = sql.Identifier(self.table)

        def update(row: int) -> sql.Composed:
            return sql.SQL("UPDATE {} SET v = v + 1 WHERE id = {}").format(t, sql.Literal(row))

        def for_update(row: int) -> sql.Composed:
            return sql.SQL("SELECT * FROM {} WHERE id = {} FOR UPDATE").format(t, sql.Literal(row))

        self._admin = self._connect("admin")
        self._admin.execute("SET lock_timeout = '5s'")
        self.server_version = self._admin.info.server_version
        try:
            self._admin.execute(
                sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, v int NOT NULL, note text)").format(t)
            )
        except psycopg.Error as exc:
            raise PgSetupError(
                f"cannot create the demo's table {self.table}: {_first_line(exc, self.dsn)}"
                " (the role needs CREATE on a schema in its search_path)"
            ) from exc
        self._created = True
        self._admin.execute(
            sql.SQL(
                "INSERT INTO {} VALUES (1, 0, 'invoice 1001'), (2, 0, 'invoice 1002'),"
                " (3, 0, 'invoice 1003')"
            ).format(t)
        )
        plan = self.plan
        # Holders must never wait: a lock_timeout makes a surprise an error, not a hang.
        holder = "SET lock_timeout = '5s'"

        self._session("billing-worker", holder, advisory(plan.billing_sync), working=True)
        self._waiter("billing-retry", advisory(plan.billing_sync))
        self._session("agent-42", holder, advisory(plan.namespace, 42), working=True)
        self._waiter("agent-42-retry", advisory(plan.namespace, 42))
        self._session("nightly-reindex", holder, advisory(plan.reindex))
        self._session("import-7", holder, advisory(*plan.unnamed_pair), working=True)

        self._session("row-holder", holder, "BEGIN", for_update(1))
        self._waiter("row-waiter-1", update(1))
        self._waiter("row-waiter-2", for_update(1))

        self._session("chain-a", holder, "BEGIN", update(2))
        chain_b = self._session("chain-b", holder, "BEGIN", update(3), "SET lock_timeout = 0")
        self._wait_on(chain_b, "chain-b", update(2))
        self._waiter("chain-c", update(3))

        self._worker = threading.Thread(target=self._work, name="demo-pg-work", daemon=True)
        self._worker.start()

    def _work(self) -> None:
        """Working holders run a query now and then, as a busy worker does: they stay
        `active` holders rather than turning into idle ones."""
        from psycopg import sql

        batch = 0
        while not self._stop.wait(WORK_EVERY_S):
            batch += 1
            for role, conn in self._working:
                label = sql.Literal(f"{role}: batch {batch} done")
                with contextlib.suppress(Exception):
                    conn.execute(sql.SQL("SELECT {}::text AS progress").format(label))

    # -- tearing down ------------------------------------------------------------------

    def _mine(self) -> str:
        return "left(application_name, length(%s)) = %s AND pid <> pg_backend_pid()"

    def backend_pids(self) -> list[int]:
        if self._admin is None:
            return []
        rows = self._admin.execute(
            f"SELECT pid FROM pg_stat_activity WHERE {self._mine()}", (self.prefix, self.prefix)
        ).fetchall()
        return [int(row[0]) for row in rows]

    def stop(self) -> list[str]:
        """End every session of the demo's (terminating first, so that none stuck in a
        lock wait holds things up), join the threads, drop the table."""
        problems: list[str] = []
        self._stop.set()
        if self._worker is not None:
            self._worker.join(STOP_WAIT_S)
        admin = self._admin
        if admin is not None:
            try:
                admin.execute(
                    f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {self._mine()}",
                    (self.prefix, self.prefix),
                )
                deadline = time.monotonic() + STOP_WAIT_S
                while self.backend_pids():
                    if time.monotonic() > deadline:
                        problems.append("some of the demo's PostgreSQL sessions did not end")
                        break
                    time.sleep(0.02)
            except Exception as exc:  # noqa: BLE001 - the connections are closed below anyway
                problems.append(f"could not end the demo's sessions: {exc}")
        for waiter in self._waiters:
            waiter.thread.join(STOP_WAIT_S)
        for conn in self._conns:
            with contextlib.suppress(Exception):
                conn.close()
        if self._created:
            problem = self._drop_table()
            if problem:
                problems.append(problem)
        if admin is not None:
            with contextlib.suppress(Exception):
                admin.close()
        return problems

    def _drop_table(self) -> str | None:
        from psycopg import sql

        drop = sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(self.table))

        def same_admin() -> Conn:
            assert self._admin is not None
            return self._admin

        attempts: list[Callable[[], Conn]] = []
        if self._admin is not None and not self._admin.closed:
            attempts.append(same_admin)
        attempts.append(lambda: self._connect("admin"))  # the first admin may be gone
        last = ""
        for get in attempts:
            try:
                conn = get()
                conn.execute("SET lock_timeout = '5s'")
                conn.execute(drop)
                if conn is not self._admin:
                    conn.close()
                self._created = False
                return None
            except Exception as exc:  # noqa: BLE001 - reported to the operator below
                last = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return f"could not drop table {self.table}: {last}"
