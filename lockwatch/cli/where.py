"""What `ls` and the dashboard look at: paths, servers and the config, checked
the same way for both, so a mistake gets the same clear error from each."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, NamedTuple

import click

if TYPE_CHECKING:
    from lockwatch.config import Config


class Targets(NamedTuple):
    roots: tuple[str, ...]  # lock trees to read ((): servers only)
    dsns: list[str]
    config: Config


def resolve_targets(
    paths: tuple[str, ...],
    pg_dsns: tuple[str, ...],
    pg_idle_after: float | None,
    config_path: str | None,
) -> Targets:
    from lockwatch.config import ConfigError, load
    from lockwatch.sources.postgres.dsn import resolve_dsns

    if any(not path for path in paths):
        raise click.BadParameter("an empty PATH (an unset variable?)", param_hint="PATH")
    if pg_idle_after is not None and not math.isfinite(pg_idle_after):
        raise click.BadParameter("must be a finite number of seconds", param_hint="--pg-idle-after")
    try:
        os.getcwd()
    except FileNotFoundError:
        raise click.UsageError("the current directory no longer exists; cd somewhere") from None
    try:
        config = load(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    dsns = resolve_dsns(pg_dsns, config.pg_dsns, os.environ)
    # With --pg and no PATH, no files: the operator asked about servers only.
    roots = paths or (() if pg_dsns else (".",))
    return Targets(roots, dsns, config)
