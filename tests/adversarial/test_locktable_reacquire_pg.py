"""knex's lock taken again while a break waits at its prompt (ABA), on a real
PostgreSQL with the real knex CLI: a killed run's `is_locked = 1` is listed and
its break asked for; at the prompt `knex migrate:unlock` frees it and a new run
takes it (`is_locked` 1 -> 0 -> 1: the same values, a new row version). On `y`
the break is refused, the new run keeps its lock, and the audit log says
refused and nothing else (issue 47, item 5).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_act_cli import Terminal
from tests.postgres.conftest import WAIT_S, pg_dsn, wait_until  # noqa: F401 - a fixture
from tests.postgres.test_locktables_knex import (  # noqa: F401 - fixtures, used by name
    is_locked,
    knex_dir,
    others_in,
    project,
    scratch,
    table_locks,
)

pytestmark = pytest.mark.postgres

# A migration outside a transaction (knex commits is_locked = 1 before it runs)
# that ends when $GO_FILE appears: knex then sets is_locked = 0 (its _freeLock).
UNTIL_TOLD = """
const fs = require('fs');
exports.config = { transaction: false };
exports.up = async () => {
  process.stdout.write('migrating\\n');
  while (!fs.existsSync(process.env.GO_FILE)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};
exports.down = async () => {};
"""


def clean_env(home: Path) -> dict[str, str]:
    """No lockwatch.toml, user config, state or server variables from this machine."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PG", "LOCKWATCH_", "SUDO_", "PYTEST", "COV_"))
    }
    home.mkdir()
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".state"),
        LANG="C.UTF-8",
    )
    return env


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_lock_row_taken_again_at_the_prompt_is_not_broken(
    project: Any,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    knex = project(UNTIL_TOLD)
    monkeypatch.setenv("GO_FILE", str(tmp_path / "go-1"))
    first = knex.start()
    (listed,) = table_locks(knex.dsn)

    log = tmp_path / "audit.jsonl"
    term = Terminal(
        ["break", listed["id"], "--force", "--reason", "aba", "--audit-log", str(log),
         "--pg", knex.dsn],
        clean_env(tmp_path / "home"),
        tmp_path,
    )  # fmt: skip
    try:
        term.expect("Break it?")
        # At the prompt: the run ends (knex's own unlock, is_locked = 0) and a new
        # run of a new migration takes the lock (is_locked = 1), in the same row.
        (tmp_path / "go-1").touch()
        assert first.wait(WAIT_S) == 0
        (knex.root / "migrations" / "002_work.js").write_text(UNTIL_TOLD)
        monkeypatch.setenv("GO_FILE", str(tmp_path / "go-2"))
        second = knex.start()
        (now,) = table_locks(knex.dsn)
        assert now["lock_table"]["row"] == listed["lock_table"]["row"]  # the same values
        term.send(b"y\n")
        code = term.wait()
    finally:
        term.close()
    assert code != 0, term.text
    assert "changed since you looked" in term.text, term.text
    # Nothing done: the new run holds its lock, as knex itself says.
    assert is_locked(knex.dsn) == 1
    assert second.poll() is None
    again = knex.latest()
    assert again.returncode != 0 and "Migration table is already locked" in again.stderr
    records = events(log)
    assert [r["event"] for r in records if r["event"] == "lock_broken"] == []
    assert records[-1]["event"] == "action_refused", records[-1]
    # What told them apart: the row's version, which a new run's write changed.
    versions = [listed["lock_table"]["version"], now["lock_table"]["version"]]
    assert all(v.startswith("xmin ") for v in versions) and len(set(versions)) == 2, versions
