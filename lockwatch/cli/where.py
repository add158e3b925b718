"""What `ls` and the dashboard look at: paths, servers and the config, checked
the same way for both, so a mistake gets the same clear error from each."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import click

from lockwatch.model.pg import DEFAULT_IDLE_AFTER

if TYPE_CHECKING:
    from lockwatch.config import Config


F = TypeVar("F", bound=Callable[..., object])

# Options several commands share, spelled once.
CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file [default: ./lockwatch.toml, then the user config dir].",
)
AUDIT_LOG_OPTION = click.option(
    "--audit-log",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The audit log [default: actions.audit_log in the config, else the user state dir's"
    " lockwatch/audit.jsonl].",
)
OPERATOR_OPTION = click.option(
    "--operator",
    metavar="NAME",
    default=None,
    help="Who acts, for the audit log [default: SUDO_USER, else your OS user].",
)
TOMBSTONE_DIR_OPTION = click.option(
    "--tombstone-dir",
    metavar="DIR",
    default=None,
    help="Where broken locks are moved: relative to each lock's directory, or absolute (same"
    " filesystem) [default: .lockwatch-broken].",
)


def target_options(func: F) -> F:
    """PATH, --pg, --pg-idle-after, --pg-all and --config: what to look at, as
    `ls` and the dashboard both take it."""
    decorators = [
        click.argument("paths", nargs=-1, metavar="[PATH]..."),
        click.option(
            "--pg",
            "pg_dsns",
            multiple=True,
            metavar="DSN",
            help="A PostgreSQL server to read pg_locks from (repeatable).",
        ),
        click.option(
            "--pg-idle-after",
            type=click.FloatRange(min=0),
            default=None,
            metavar="SECONDS",
            help="Idle (in transaction) holders older than this are stale"
            f" [default: {DEFAULT_IDLE_AFTER:g}].",
        ),
        click.option(
            "--pg-all",
            is_flag=True,
            help="Every pg_locks row, not only contended and advisory ones.",
        ),
        CONFIG_OPTION,
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


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
