"""The console script starts with the cyclic collector off (its imports' objects
live as long as the process): `ls` keeps it off, every other command turns it
back on before it runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from lockwatch.cli import cli


@pytest.fixture
def collector_off() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()  # as main() leaves it
    try:
        yield
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize(("command", "enabled"), [("ls", False), ("why", True), ("audit", True)])
def test_only_ls_runs_without_the_collector(
    collector_off: None, command: str, enabled: bool
) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert gc.isenabled() is enabled
