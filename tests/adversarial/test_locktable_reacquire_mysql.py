"""knex's lock taken again while a break waits at its prompt (ABA), on a real
MariaDB with the real knex CLI and mysql2. InnoDB keeps no row version a client
can read: the row's version is its table's last change (UPDATE_TIME, whole
seconds), locked and compared by the break. The run at work ends at the prompt
(is_locked = 0) and a new run takes the row again (is_locked = 1, the same
values): on `y` the break is refused, the new run keeps its lock, and the audit
log says refused and nothing else (issue 47, item 5).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.adversarial.test_locktable_reacquire_pg import UNTIL_TOLD, clean_env, events
from tests.cli.test_act_cli import Terminal
from tests.mysql.conftest import GROUP, WAIT_S, endpoint_of, my_dsn, past_last_change  # noqa: F401
from tests.mysql.test_locktables_knex import (  # noqa: F401 - fixtures, used by name
    MyProject,
    is_locked,
    knex_dir,
    scratch,
    table_locks,
)

pytestmark = [pytest.mark.mysql, GROUP]


def test_a_lock_row_taken_again_at_the_prompt_is_not_broken(
    knex_dir: Path,  # noqa: F811 - the fixture imported above
    scratch: str,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "project").mkdir()
    knex = MyProject(tmp_path / "project", knex_dir, scratch, UNTIL_TOLD)
    second: subprocess.Popen[str] | None = None
    try:
        monkeypatch.setenv("GO_FILE", str(tmp_path / "go-1"))
        first = knex.start()
        # Looked at past the second of the run's acquire: UPDATE_TIME has whole seconds.
        past_last_change(endpoint_of(scratch), urlsplit(scratch).path[1:], "knex_migrations_lock")
        (listed,) = table_locks(scratch)

        log = tmp_path / "audit.jsonl"
        term = Terminal(
            ["break", listed["id"], "--force", "--reason", "aba", "--audit-log", str(log),
             "--mysql", scratch],
            {**clean_env(tmp_path / "home"), "MYSQL_PWD": ""},
            tmp_path,
        )  # fmt: skip
        try:
            term.expect("Break it?")
            (tmp_path / "go-1").touch()  # the run ends: knex sets is_locked = 0
            assert first.wait(WAIT_S) == 0
            (knex.root / "migrations" / "002_work.js").write_text(UNTIL_TOLD)
            monkeypatch.setenv("GO_FILE", str(tmp_path / "go-2"))
            second = knex.start()  # a new run: is_locked = 1 again, the same row
            (now,) = table_locks(scratch)
            assert now["lock_table"]["row"] == listed["lock_table"]["row"]
            term.send(b"y\n")
            code = term.wait()
        finally:
            term.close()
        assert code != 0, term.text
        assert "changed since you looked" in term.text, term.text
        assert is_locked(scratch) == 1
        assert second.poll() is None
        records = events(log)
        assert [r["event"] for r in records if r["event"] == "lock_broken"] == []
        assert records[-1]["event"] == "action_refused", records[-1]
        assert listed["lock_table"]["version"].startswith("update_time "), listed
    finally:
        knex.stop()
