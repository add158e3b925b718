"""The one round trip lockwatch makes per poll: three statements, sent together
(with the lock tables' catalog query after them: source.py, locktables.py).

The first reads the locks and refers to sessions by pid; the last reads the
sessions (pg_stat_activity) once, so a session's query text and times travel
once, not once per lock it holds (a pooled connection may hold hundreds).
Statements sent together run in one transaction, and PostgreSQL reads every
session's status once per transaction, at its first look
(pgstat_read_current_status): the sessions read first, or read after a look
at pg_stat_activity within the locks' statement, can be older than the locks,
and a lock's holder is then shown as it was before it took the lock (idle,
with its previous query, while it sits idle in the transaction holding it).
So the sessions are read after the locks, the status snapshot discarded in
between (pg_stat_clear_snapshot(), the second statement): every lock listed is
described by its session as it was at or after the lock was seen.
pg_blocking_pids() runs only for sessions waiting on a lock, never per pg_locks
row (the docs warn it takes every lock-manager partition). Ages are computed on
the server, against its own clock, so skew between hosts cannot distort them.
Only rows of interest come back unless `all_rows` (advisory locks, waiting rows,
the locks of blockers, prepared transactions); the source narrows blockers'
rows down to those someone actually waits on.
"""

from __future__ import annotations

from collections.abc import Iterable

# Discards the transaction's snapshot of the sessions' status (and of the
# statistics): the sessions' statement after it reads them afresh. The port the
# server listens on comes with it (client lookups look for connections to it),
# not in a round trip of its own.
_FRESH = """
SELECT pg_catalog.pg_stat_clear_snapshot(), pg_catalog.current_setting('port') AS port;
"""

_SESSIONS = """
SELECT a.pid, a.datname, a.usename, a.application_name,
       -- client_port is -1 for a unix socket, NULL when hidden from our role.
       COALESCE(host(a.client_addr), CASE WHEN a.backend_type = 'client backend'
                                           AND a.client_port = -1
                                          THEN 'local' END) AS client,
       a.client_port,
       a.backend_type, a.state, a.wait_event_type, a.wait_event, a.query,
       EXTRACT(epoch FROM now() - a.xact_start)::float8 AS xact_age,
       EXTRACT(epoch FROM now() - a.query_start)::float8 AS query_age,
       EXTRACT(epoch FROM now() - a.state_change)::float8 AS state_age,
       EXTRACT(epoch FROM now() - a.backend_start)::float8 AS backend_age,
       -- The server's own times, as it wrote them: a session is (pid, backend_start),
       -- and one that did anything since has another state_change. An action's
       -- compare-and-swap reads them again and compares them exactly (actor.py).
       a.backend_start AS backend_started, a.state_change AS state_changed
FROM pg_catalog.pg_stat_activity AS a
WHERE a.pid <> pg_catalog.pg_backend_pid();
"""

_LOCKS_WITH = """
WITH locks AS MATERIALIZED (
    -- One snapshot of the lock table, read once.
    SELECT * FROM pg_catalog.pg_locks
),
waiting AS (
    -- Sessions with an ungranted lock, from pg_locks itself: every role can read
    -- it, while pg_stat_activity hides others' wait_event without pg_read_all_stats.
    SELECT pid, pg_catalog.pg_blocking_pids(pid) AS blocked_by
    FROM (SELECT DISTINCT pid FROM locks WHERE NOT granted AND pid IS NOT NULL) AS w
),
prepared AS (
    -- A prepared transaction's locks keep the vxid of the session that prepared it
    -- (or -1/<xid> after a restart); its own xid lock ties that vxid to its gid.
    SELECT x.virtualtransaction, p.gid, p.owner,
           EXTRACT(epoch FROM now() - p.prepared)::float8 AS prepared_age
    FROM locks AS x
    JOIN pg_catalog.pg_prepared_xacts AS p
      ON x.locktype = 'transactionid' AND x.transactionid = p.transaction
    WHERE x.pid IS NULL
),
blockers AS (
    SELECT DISTINCT unnest(blocked_by) AS pid FROM waiting
),
held AS (
    -- Every lock each session holds, by type: what terminating it releases.
    SELECT pid, string_agg(locktype || '=' || n, ',' ORDER BY locktype) AS kinds
    FROM (SELECT pid, locktype, count(*) AS n FROM locks
          WHERE granted AND pid IS NOT NULL GROUP BY pid, locktype) AS c
    GROUP BY pid
){terraform}
"""

# Terraform's pg backend locks a workspace with pg_try_advisory_lock(<id of its row
# in <schema>.states>) (and -1 while it creates one). Its `states` tables (id, name,
# data, with its states_by_name index or ids from its global_states_id_seq: any
# schema, its schema_name setting) are read once per poll, and only when
# an advisory bigint key is held in this database and such a table exists that no
# one locks exclusively (the poll must not queue behind a DDL); at most 1,000 rows.
# A table that may not exist cannot be named in plain SQL: query_to_xml runs the
# statement put together from the catalog, and XMLTABLE reads its rows back.
_TERRAFORM = """,
terraform_tables AS (
    SELECT string_agg(format('SELECT id, name FROM %I.%I', n.nspname, c.relname),
                      ' UNION ALL ') || ' LIMIT 1000' AS statement
    FROM pg_catalog.pg_class AS c
    JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.relname = 'states' AND c.relkind IN ('r', 'p')
      AND EXISTS (SELECT 1 FROM locks WHERE locktype = 'advisory' AND objsubid = 1
                  AND database = (SELECT oid FROM pg_catalog.pg_database
                                  WHERE datname = pg_catalog.current_database()))
      AND (SELECT count(*) FROM pg_catalog.pg_attribute AS a
           WHERE a.attrelid = c.oid AND a.attname IN ('id', 'name', 'data')
             AND NOT a.attisdropped) = 3
      -- Terraform's own, not any table called `states`: its index by name, or ids
      -- from its global sequence.
      AND (EXISTS (SELECT 1 FROM pg_catalog.pg_index AS i
                   JOIN pg_catalog.pg_class AS ic ON ic.oid = i.indexrelid
                   WHERE i.indrelid = c.oid AND ic.relname = 'states_by_name')
           OR EXISTS (SELECT 1 FROM pg_catalog.pg_attrdef AS d
                      JOIN pg_catalog.pg_attribute AS a
                        ON a.attrelid = d.adrelid AND a.attnum = d.adnum
                      WHERE d.adrelid = c.oid AND a.attname = 'id'
                        AND pg_catalog.pg_get_expr(d.adbin, d.adrelid)
                            LIKE '%global_states_id_seq%'))
      AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
      AND NOT EXISTS (SELECT 1 FROM locks AS x WHERE x.locktype = 'relation'
                      AND x.relation = c.oid AND x.mode = 'AccessExclusiveLock')
),
terraform AS MATERIALIZED (
    SELECT t.id, 'terraform state ' || t.name AS label
    FROM terraform_tables AS s,
         XMLTABLE('/table/row'
                  PASSING pg_catalog.query_to_xml(s.statement, false, false, '')
                  COLUMNS id int8 PATH 'id', name text PATH 'name') AS t
    WHERE s.statement IS NOT NULL
    UNION ALL
    SELECT -1, 'terraform state (a workspace being created)'
    FROM terraform_tables AS s WHERE s.statement IS NOT NULL
)"""

_SELECT = """
SELECT l.locktype, l.mode, l.granted, l.pid, l.virtualtransaction,
       -- What the lock is on (TARGET) is put together here from these columns
       -- (target_of): a tenth of the rows' bytes, and of the server's work, less.
       l.database, d.datname AS database_name,
       l.relation, n.nspname AS schema_name, c.relname AS relation_name,
       l.page, l.tuple, l.virtualxid, l.transactionid::text AS transactionid,
       l.classid::int8 AS classid, l.objid::int8 AS objid, l.objsubid,
       CASE WHEN l.locktype = 'object' AND l.database IN (0, me.oid)
            THEN pg_catalog.pg_describe_object(l.classid, l.objid, l.objsubid) END AS object_name,
       {wait_age} AS wait_age,
       p.gid AS prepared_gid, p.owner AS prepared_owner, p.prepared_age,
       w.blocked_by, h.kinds AS held_kinds, {terraform_column} AS terraform_state
FROM locks AS l
CROSS JOIN (SELECT oid FROM pg_catalog.pg_database
            WHERE datname = pg_catalog.current_database()) AS me
LEFT JOIN waiting AS w ON w.pid = l.pid
LEFT JOIN held AS h ON h.pid = l.pid
LEFT JOIN pg_catalog.pg_database AS d ON d.oid = l.database
-- Relation OIDs mean something only in the database they belong to (or 0: shared).
LEFT JOIN pg_catalog.pg_class AS c ON c.oid = l.relation AND l.database IN (0, me.oid)
LEFT JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN prepared AS p
       ON l.pid IS NULL AND p.virtualtransaction = l.virtualtransaction{terraform_join}
WHERE (l.pid IS NULL OR l.pid <> pg_catalog.pg_backend_pid())
  AND ({all_rows}
       OR l.locktype = 'advisory'
       OR NOT l.granted
       OR l.pid IS NULL
       OR l.pid IN (SELECT pid FROM blockers)
       -- Idle in a transaction past the idle limit: a stale holder stays listed
       -- whether or not anyone waits on it now (records.py keeps one of its rows).
       OR l.pid IN (SELECT pid FROM pg_catalog.pg_stat_activity
                    WHERE state IN ('idle in transaction', 'idle in transaction (aborted)')
                      AND state_change < now() - make_interval(secs => {idle_after})))
-- Grouped by session, so listings are repeatable and read naturally.
ORDER BY l.pid NULLS LAST;
"""

# A bigint advisory key is classid (high half) and objid (low half), objsubid 1.
_TERRAFORM_JOIN = """
LEFT JOIN terraform AS tf
       ON l.locktype = 'advisory' AND l.objsubid = 1 AND l.database = me.oid
      AND tf.id = ((l.classid::int8 << 32) | l.objid::int8)"""


# What a pg_locks row (alias l) is on, as one key: rows with the same target compete.
# Lock ids carry it, and actions re-check a holder with it.
TARGET = (
    "format('%s/%s/%s/%s/%s/%s/%s/%s/%s/%s', l.locktype, l.database, l.relation, l.page,"
    " l.tuple, l.virtualxid, l.transactionid, l.classid, l.objid, l.objsubid)"
)
# The poll's columns TARGET is made of, in its order.
TARGET_COLUMNS = (
    "locktype", "database", "relation", "page", "tuple", "virtualxid", "transactionid",
    "classid", "objid", "objsubid",
)  # fmt: skip


def target_of(values: Iterable[object]) -> str:
    """TARGET of a poll's row, from its TARGET_COLUMNS values, as the server writes
    it (NULL as nothing). No value can spell `None`: the lock types are words
    without it and the rest are numbers (virtualxid `3/45`), so writing each with
    str() and dropping `None` is format()'s answer, in three C calls per row."""
    return "/".join(map(str, values)).replace("None", "")


def lock_query(server_version: int, all_rows: bool, idle_after: float | None = None) -> str:
    """The poll for a server of `server_version` (PQserverVersion, e.g. 150020):
    its results are the locks, pg_stat_clear_snapshot()'s one row (with the
    server's port), the sessions;
    `idle_after`: the idle limit whose sessions idle in a transaction past it are
    read too (None: none are)."""
    # pg_locks.waitstart arrived in PostgreSQL 14.
    wait_age = (
        "EXTRACT(epoch FROM now() - l.waitstart)::float8"
        if server_version >= 140000
        else "NULL::float8"
    )
    # XMLTABLE arrived in PostgreSQL 10.
    terraform = server_version >= 100000
    return (
        _LOCKS_WITH.format(terraform=_TERRAFORM if terraform else "")
        + _SELECT.format(
            wait_age=wait_age,
            all_rows="true" if all_rows else "false",
            # A float as SQL's numeric literal (repr: no exponent below 1e16).
            idle_after="'Infinity'::float8" if idle_after is None else repr(float(idle_after)),
            terraform_column="tf.label" if terraform else "NULL::text",
            terraform_join=_TERRAFORM_JOIN if terraform else "",
        )
        + _FRESH
        + _SESSIONS
    )
