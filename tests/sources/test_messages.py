"""What each source recognises in pasted text (`lockwatch why`): the tools' own
messages, parsed by the patterns in their sources' packages."""

from __future__ import annotations

from lockwatch.model.clues import Clue, ClueKind
from lockwatch.sources.files import messages as files
from lockwatch.sources.mysql import messages as mysql
from lockwatch.sources.postgres import messages as postgres


def _lock_name(path: str) -> bool:
    return path.endswith(".lock")


def kinds(clues: list[Clue]) -> list[tuple[str, str]]:
    return [(clue.kind.value, clue.value) for clue in clues]


# apt's literal message (apt 2.x, "E: Could not get lock ...").
APT = (
    "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 1234 (apt-get)\n"
    "N: Be aware that removing the lock file is not a solution and may break your system.\n"
    "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another"
    " process using it?"
)
# Terraform 1.11.4's literal message (local backend, `terraform plan -lock-timeout=0s`).
TERRAFORM = """Error: Error acquiring the state lock

Error message: resource temporarily unavailable
Lock Info:
  ID:        48f64066-ee33-ed52-282b-bbfd2cb338d5
  Path:      terraform.tfstate
  Operation: OperationTypeInvalid
  Who:       root@vm
  Version:   1.11.4
  Created:   2026-11-27 17:29:55.001798907 +0000 UTC
  Info:
"""


def test_apt_names_the_lock_file_and_its_holder() -> None:
    clues = files.clues(APT, _lock_name)
    assert kinds(clues) == [
        ("path", "/var/lib/dpkg/lock-frontend"),
        ("pid", "1234"),
        ("path", "/var/lib/dpkg/lock-frontend"),
    ]
    pid = clues[1]
    assert pid.command == "apt-get" and pid.tool == "apt"
    assert "dpkg --configure -a" in (pid.advice or "")


def test_apts_message_to_a_user_who_may_not_open_the_lock_names_it() -> None:
    """apt 2.6's own words to a non-root user (issue 42): its first line alone
    names the lock too."""
    said = "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)"
    assert kinds(files.clues(said, _lock_name)) == [("path", files.DPKG_FRONTEND)]
    said += (
        "\nE: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?"
    )
    paths = {clue.value for clue in files.clues(said, _lock_name)}
    assert paths == {files.DPKG_FRONTEND}


def test_dpkg_messages() -> None:
    said = "dpkg: error: dpkg frontend lock was locked by another process with pid 4321"
    assert kinds(files.clues(said, _lock_name)) == [
        ("path", files.DPKG_FRONTEND),
        ("pid", "4321"),
    ]
    said = "dpkg: error: dpkg status database is locked by another process"
    assert kinds(files.clues(said, _lock_name)) == [("path", files.DPKG_LOCK)]
    said = "E: Unable to lock the administration directory (/var/lib/dpkg/), is another process"
    assert kinds(files.clues(said, _lock_name)) == [("path", "/var/lib/dpkg/lock")]


def test_git_messages() -> None:
    said = "fatal: Unable to create '/srv/app/.git/index.lock': File exists.\n\nAnother git"
    (clue,) = files.clues(said, _lock_name)
    assert (clue.kind, clue.value, clue.tool) == (ClueKind.PATH, "/srv/app/.git/index.lock", "git")
    said = "error: could not lock config file .git/config: File exists"
    assert kinds(files.clues(said, _lock_name)) == [("path", ".git/config.lock")]


def test_terraform_lock_info() -> None:
    clues = files.clues(TERRAFORM, _lock_name)
    assert kinds(clues) == [
        ("path", ".terraform.tfstate.lock.info"),
        ("tool_id", "48f64066-ee33-ed52-282b-bbfd2cb338d5"),
    ]
    assert "terraform force-unlock 48f64066-ee33-ed52-282b-bbfd2cb338d5" in (clues[0].advice or "")
    assert files.terraform_lock_file("env/prod.tfstate") == "env/.prod.tfstate.lock.info"


def test_flock_and_lockfile_progs_command_lines() -> None:
    said = "$ flock -n -w 3 /var/lock/backup.lock rsync -a /src /dst\nflock: failed to get lock"
    assert kinds(files.clues(said, _lock_name)) == [("path", "/var/lock/backup.lock")]
    assert kinds(files.clues("flock: failed to get lock", _lock_name)) == [("hint", "flock_busy")]
    assert kinds(files.clues("lockfile-create --retry 2 /var/run/job", _lock_name)) == [
        ("path", "/var/run/job.lock")
    ]
    named = files.clues("lockfile-create -l /var/run/job.pid", _lock_name)
    assert kinds(named) == [("path", "/var/run/job.pid")]


def test_sqlite_and_plain_paths() -> None:
    assert kinds(files.clues("sqlite3.OperationalError: database is locked", _lock_name)) == [
        ("hint", "sqlite_busy")
    ]
    (clue,) = files.clues("database is locked: /srv/app/app.db", _lock_name)
    assert clue.value == "/srv/app/app.db" and clue.lock_file is False
    assert dict(clue.options) == {"kernel": True}
    (plain,) = files.clues("app.db", _lock_name)
    assert plain.lock_file is False
    (lock,) = files.clues("  deploy.lock\n", _lock_name)
    assert lock.lock_file is True and lock.options == ()
    assert files.clues("hello world", _lock_name) == []


def test_postgres_messages() -> None:
    # psycopg's text of PostgreSQL 16's errors, as tests/postgres/test_why_pg.py makes them.
    timeout = (
        "canceling statement due to lock timeout\n"
        'CONTEXT:  while updating tuple (0,1) in relation "jobs"'
    )
    assert kinds(postgres.clues(timeout)) == [("name", "jobs"), ("hint", "lock_timeout")]
    deadlock = (
        "ERROR:  deadlock detected\nDETAIL:  Process 8525 waits for ShareLock on transaction 740;"
        " blocked by process 8527.\nProcess 8527 waits for ShareLock on transaction 741;"
        " blocked by process 8525."
    )
    clues = postgres.clues(deadlock)
    assert kinds(clues) == [("pid", "8525"), ("pid", "8527"), ("hint", "deadlock")]
    assert dict(clues[0].options) == {"pg_all": True}
    nowait = 'ERROR:  could not obtain lock on relation "jobs"'
    assert kinds(postgres.clues(nowait)) == [("name", "jobs"), ("hint", "nowait")]
    statement = "ERROR:  canceling statement due to statement timeout"
    (clue,) = postgres.clues(statement)
    assert clue.kind is ClueKind.NOT_A_LOCK and "not a lock" in (clue.advice or "")
    assert postgres.clues("fatal: Unable to create 'x.lock'") == []


def test_mysql_messages() -> None:
    said = "ERROR 1205 (HY000): Lock wait timeout exceeded; try restarting transaction"
    assert kinds(mysql.clues(said)) == [("hint", "lock_wait_timeout")]
    said = "(1213, 'Deadlock found when trying to get lock; try restarting transaction')"
    assert kinds(mysql.clues(said)) == [("hint", "deadlock")]
    (name,) = mysql.clues("SELECT GET_LOCK('nightly-reindex', 10)")
    assert name.value == "nightly-reindex" and dict(name.options) == {
        "mysql_locks": ("nightly-reindex",)
    }
    assert kinds(mysql.clues("IS_USED_LOCK(\"it''s\")")) == [("name", "it''s")]
    assert mysql.clues("port 1205 is open") == []


def test_mysql_names_are_read_as_mysqls_lexer_reads_them() -> None:
    """Issue 47 item 2 on why's path: a call in a comment or string is no call."""
    decoys = (
        "SELECT /* GET_LOCK('victim', 1) */ GET_LOCK('real', 200)",
        "SELECT 'GET_LOCK(\"victim\", 1)', GET_LOCK('real', 200)",
        "SELECT # GET_LOCK('victim', 1)\n GET_LOCK('real', 200)",
        "MariaDB [app]> SELECT -- GET_LOCK('victim', 1)\n  GET_LOCK('real', 200);",
    )
    for said in decoys:
        assert kinds(mysql.clues(said)) == [("name", "real")], said
    # A `\\n` is a newline (or, under NO_BACKSLASH_ESCAPES, the two characters).
    assert kinds(mysql.clues("SELECT GET_LOCK('a\\nb', 5)")) == [
        ("name", "a\nb"),
        ("name", "a\\nb"),
    ]
    assert kinds(mysql.clues("it can't: GET_LOCK('x', 1)")) == [("name", "x")]


# The mariadb client's literal stderr (10.11, batch mode) for a statement that
# timed out: the statement boxed in dashes, then the error.
MARIADB_BOX = """--------------
SELECT * FROM `shop`.orders WHERE id='A-7' FOR UPDATE
--------------

ERROR 1205 (HY000) at line 1: Lock wait timeout exceeded; try restarting transaction
"""


def test_mysql_statement_names_its_tables_and_row() -> None:
    table, hint = mysql.clues(MARIADB_BOX)
    assert (table.kind, table.value) == (ClueKind.NAME, "shop.orders")
    assert hint.value == "lock_wait_timeout"
    assert dict(table.detail) == {"is": "table", "row": "id='A-7'", "key": "A-7"}
    prompt = "MariaDB [shop]> UPDATE jobs SET v = 1 WHERE v = 0;\nERROR 1205 (HY000): Lock wait"
    assert kinds(mysql.clues(prompt)) == [("name", "jobs"), ("hint", "lock_wait_timeout")]
    # A statement alone is no lock error: its tables are looked up only beside one.
    assert mysql.clues("SELECT * FROM orders WHERE id = 1") == []
    # A GET_LOCK name and a table of the same name are two clues.
    both = mysql.clues("ERROR 1205 (HY000)\n\nSELECT GET_LOCK('t', 1) FROM t")
    assert [c.said("is") for c in both if c.kind is ClueKind.NAME] == ["lock", "table"]


def test_postgres_statement_line_names_its_table() -> None:
    # psql -b (--echo-errors) and the server's log add the failed statement.
    said = (
        "ERROR:  canceling statement due to lock timeout\n"
        'STATEMENT:  UPDATE "Odd"."Jobs" SET v = 2 WHERE id = 1'
    )
    assert kinds(postgres.clues(said)) == [("name", "Odd.Jobs"), ("hint", "lock_timeout")]
