"""The SQL one poll runs, for MariaDB (and MySQL 5.7) and for MySQL 8.

Every query is read-only and reads in-memory tables; each is one round trip.
"""

from __future__ import annotations

# Who is connected: every thread but lockwatch's own. MariaDB has TIME_MS (the
# current command's age to the microsecond) and QUERY_ID (KILL QUERY ID's target).
PROCESSLIST_MARIADB = """
SELECT ID, USER, HOST, DB, COMMAND, TIME_MS, STATE, INFO, QUERY_ID
FROM information_schema.PROCESSLIST
WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Daemon'
"""
PROCESSLIST_MYSQL = """
SELECT ID, USER, HOST, DB, COMMAND, TIME * 1000 AS TIME_MS, STATE, INFO, NULL AS QUERY_ID
FROM information_schema.PROCESSLIST
WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Daemon'
"""

# Open transactions, keyed by thread (a read-only MariaDB trx has trx_id 0).
# Needs PROCESS: error 1227 says it is missing.
TRANSACTIONS = """
SELECT trx_mysql_thread_id, trx_started, trx_state, trx_wait_started, trx_id,
       trx_requested_lock_id, trx_lock_structs
FROM information_schema.INNODB_TRX
"""

# MariaDB: the wait graph's three tables, read one after another (the same cached
# snapshot) and joined here: the server's nested-loop join of them costs seconds
# at thousands of waits, the three reads milliseconds.
LOCK_WAITS_MARIADB = """
SELECT requesting_trx_id, requested_lock_id, blocking_trx_id, blocking_lock_id
FROM information_schema.INNODB_LOCK_WAITS
"""
LOCKS_MARIADB = """
SELECT lock_id, lock_mode, lock_type, lock_table, lock_index, lock_data
FROM information_schema.INNODB_LOCKS
"""

# Who waits on whom among InnoDB transactions: one row per edge, with both locks
# (as one server-side join: the reference, and MySQL 8's way).
INNODB_WAITS_MARIADB = """
SELECT r.trx_mysql_thread_id AS waiting_thread, r.trx_wait_started AS wait_started,
       rl.lock_mode AS waiting_mode, rl.lock_type AS lock_type, rl.lock_table AS locked_table,
       rl.lock_index AS locked_index, rl.lock_data AS locked_data,
       b.trx_mysql_thread_id AS blocking_thread, b.trx_started AS blocking_started,
       bl.lock_mode AS blocking_mode, bl.lock_id = b.trx_requested_lock_id AS blocking_waits
FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
JOIN information_schema.INNODB_LOCKS rl ON rl.lock_id = w.requested_lock_id
JOIN information_schema.INNODB_LOCKS bl ON bl.lock_id = w.blocking_lock_id
"""
INNODB_WAITS_MYSQL = """
SELECT r.trx_mysql_thread_id AS waiting_thread, r.trx_wait_started AS wait_started,
       rl.LOCK_MODE AS waiting_mode, rl.LOCK_TYPE AS lock_type,
       CONCAT('`', rl.OBJECT_SCHEMA, '`.`', rl.OBJECT_NAME, '`') AS locked_table,
       rl.INDEX_NAME AS locked_index, rl.LOCK_DATA AS locked_data,
       b.trx_mysql_thread_id AS blocking_thread, b.trx_started AS blocking_started,
       bl.LOCK_MODE AS blocking_mode, bl.LOCK_STATUS = 'WAITING' AS blocking_waits
FROM performance_schema.data_lock_waits w
JOIN information_schema.INNODB_TRX r ON r.trx_id = w.REQUESTING_ENGINE_TRANSACTION_ID
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID
JOIN performance_schema.data_locks rl ON rl.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
JOIN performance_schema.data_locks bl ON bl.ENGINE_LOCK_ID = w.BLOCKING_ENGINE_LOCK_ID
"""

# MariaDB's metadata_lock_info plugin: granted metadata locks only (named locks
# carry their name in TABLE_SCHEMA). Readable without any privilege.
PLUGIN_ACTIVE = """
SELECT COUNT(*) FROM information_schema.PLUGINS
WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'
"""
METADATA_LOCK_INFO = """
SELECT THREAD_ID, LOCK_MODE, LOCK_TIME_MS, LOCK_TYPE, TABLE_SCHEMA, TABLE_NAME
FROM information_schema.METADATA_LOCK_INFO
WHERE LOCK_TYPE IN ('User lock', 'Table metadata lock')
"""
# MySQL 8: granted and pending metadata locks, named locks among them.
METADATA_LOCKS_MYSQL = """
SELECT t.PROCESSLIST_ID AS THREAD_ID, m.LOCK_TYPE AS LOCK_MODE, NULL AS LOCK_TIME_MS,
       IF(m.OBJECT_TYPE = 'USER LEVEL LOCK', 'User lock', 'Table metadata lock') AS LOCK_TYPE,
       IF(m.OBJECT_TYPE = 'USER LEVEL LOCK', m.OBJECT_NAME, m.OBJECT_SCHEMA) AS TABLE_SCHEMA,
       IF(m.OBJECT_TYPE = 'USER LEVEL LOCK', '', m.OBJECT_NAME) AS TABLE_NAME,
       m.LOCK_STATUS AS LOCK_STATUS
FROM performance_schema.metadata_locks m
JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID
WHERE m.OBJECT_TYPE IN ('USER LEVEL LOCK', 'TABLE') AND t.PROCESSLIST_ID IS NOT NULL
"""

# Sessions waiting on a lock, by PROCESSLIST.STATE.
USER_LOCK_STATE = "User lock"
MDL_STATES = ("Waiting for table metadata lock",)

# The unix-socket sessions, read again after the sockets were (see server.py).
LOCAL_SESSIONS = """
SELECT ID FROM information_schema.PROCESSLIST
WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Daemon' AND HOST = 'localhost'
"""
# The client's own pid, as it reported it on connecting (performance_schema).
CONNECT_PID = """
SELECT PROCESSLIST_ID, ATTR_VALUE FROM performance_schema.session_connect_attrs
WHERE ATTR_NAME = '_pid'
"""
