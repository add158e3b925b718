"""Actions travel with their source: `lockwatch.actions` asks each source's
provider (`Source.actions`) and never names a source; an id no source has is
refused, never taken for a file."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from lockwatch.actions.audit_format import read_records
from lockwatch.actions.run import _unseen_target
from lockwatch.actions.targets import source_for, unseen_id
from lockwatch.model.action import Kind
from lockwatch.sources.contract import SourceError
from lockwatch.sources.registry import SOURCES, by_name

ACTIONS_PACKAGE = Path(__file__).resolve().parents[2] / "lockwatch" / "actions"
FAMILIES = ("pg", "kernel", "store", "remote")


@pytest.fixture
def cli_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for key in list(os.environ):
        if key.startswith(("PG", "LOCKWATCH_", "SUDO_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_an_id_no_source_has_is_refused_as_usage_and_not_audited(
    cli_in: CliRunner, tmp_path: Path
) -> None:
    from lockwatch.cli import cli

    log = tmp_path / "audit.jsonl"
    target = "consul:127.0.0.1:8500:deploy"  # a lock service no source reads
    for args in (
        ["break", "nosuch:foo", "--reason", "x", "--yes"],
        ["break", target, "--reason", "x", "--yes"],
        ["steal", target, "--reason", "x", "--yes"],
    ):
        result = cli_in.invoke(cli, [*args, "--audit-log", str(log)])
        assert result.exit_code == 2, result.output
        said = [line for line in result.stderr.splitlines() if "no source has" in line]
        assert len(said) == 1 and said[0].startswith("lockwatch: "), result.stderr
    # Nothing audited, and above all nothing under an invented source ('file').
    records = [record for _, record, _ in read_records(log)] if log.exists() else []
    assert all((r or {}).get("target", {}).get("source") != "file" for r in records)
    assert records == []


def test_a_file_whose_name_looks_like_an_id_is_still_a_path(
    cli_in: CliRunner, tmp_path: Path
) -> None:
    (tmp_path / "deploy:prod.lock").write_text("")
    assert source_for("deploy:prod.lock").name == "file"
    assert unseen_id("deploy:prod.lock") == f"file:{tmp_path}/deploy:prod.lock"
    with pytest.raises(SourceError):
        source_for("nosuch:foo")


def test_unseen_targets_name_their_own_source() -> None:
    assert _unseen_target("pg:monitor@db1:5432/app:1:advisory/1:ExclusiveLock:held") == {
        "source": "postgres",
        "id": "pg:monitor@db1:5432/app:1:advisory/1:ExclusiveLock:held",
        "server": "monitor@db1:5432/app",
    }
    assert _unseen_target("redis:cache1:6379/0:lock:deploy")["source"] == "redis"
    assert _unseen_target("etcd:etcd1:2379:/locks/a")["source"] == "etcd"
    assert _unseen_target("file:/srv/a.lock") == {
        "source": "file",
        "id": "file:/srv/a.lock",
        "path": "/srv/a.lock",
    }
    assert _unseen_target("consul:x")["source"] is None


def test_every_source_declares_its_actions() -> None:
    offered = {
        source.name: {kind.value for kind in source.actions.kinds}
        for source in SOURCES
        if source.actions is not None
    }
    expected = {
        "file": {"break", "steal", "release"},
        "postgres": {"break", "steal", "release", "cancel"},
        "kernel": {"break"},
        "remote": set(),
        "redis": {"break"},
        "etcd": {"break"},
    }
    # These sources offer what they always did; any other source offers what it says.
    assert {name: offered[name] for name in expected} == expected
    pg = by_name("postgres")
    assert pg is not None and pg.actions is not None
    assert pg.action_options(Kind.BREAK) == ()


def test_the_commands_options_come_from_the_sources() -> None:
    from lockwatch.cli.act import command
    from lockwatch.model.kinds import entry

    break_, steal, release, cancel = (
        command(entry(kind)) for kind in (Kind.BREAK, Kind.STEAL, Kind.RELEASE, Kind.CANCEL)
    )

    def names(command: object) -> set[str]:
        return {p.name for p in command.params if p.name}  # type: ignore[attr-defined]

    where = {"pg_dsns", "redis_urls", "etcd_urls"}
    assert where | {"signal", "force"} <= names(break_)
    assert where | {"pid"} <= names(steal) and "signal" not in names(steal)
    assert where <= names(release) and where <= names(cancel)


def test_actions_never_name_a_source() -> None:
    """No `lock.source == "..."`, no `lock.pg`/`.store`/`.kernel`/`.remote` in
    lockwatch/actions: it asks the source's provider."""
    for path in ACTIONS_PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in FAMILIES:
                raise AssertionError(f"{path.name}:{node.lineno} reads .{node.attr}")
            if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Attribute) and side.attr == "source"
                for side in (node.left, *node.comparators)
            ):
                raise AssertionError(f"{path.name}:{node.lineno} compares a source's name")
