"""What `ls` and the dashboard look at: paths, servers and the config, checked
the same way for both, so a mistake gets the same clear error from each."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import click

if TYPE_CHECKING:
    from lockwatch.config import Config
    from lockwatch.sources.contract import Hint, Selected, Source, Wanted


F = TypeVar("F", bound=Callable[..., object])

# Options several commands share, spelled once.
CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file [default: ./lockwatch.toml, then the user config dir].",
)


def file_option(flag: str, help: str, metavar: str | None = None) -> Callable[[F], F]:
    """An option naming one file (never a directory), as a Path; None when not given."""
    return click.option(
        flag,
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        metavar=metavar,
        help=help,
    )


AUDIT_LOG_OPTION = file_option(
    "--audit-log",
    "The audit log [default: actions.audit_log in the config, else the user state dir's"
    " lockwatch/audit.jsonl].",
)
AUDIT_KEY_OPTION = file_option(
    "--audit-key",
    "The audit log's HMAC key, kept apart from the log (made 0600 on first use)"
    " [default: actions.audit_key in the config, else the user config dir's lockwatch/audit.key].",
)
AUDIT_SYSLOG_OPTION = click.option(
    "--audit-syslog",
    type=click.Choice(["required", "best-effort"]),
    is_flag=False,
    flag_value="required",
    default=None,
    help="Also send each audit record's hash to syslog/journald (as lockwatch-audit), where"
    " whoever can rewrite the log cannot take it back; no action when syslog cannot be"
    " reached, unless --audit-syslog=best-effort [or actions.audit_syslog].",
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
    """What to look at, as `ls` and the dashboard both take it: every source's
    options (PATH, --pg, --kernel, ...) from the registry, and --config."""
    from lockwatch.sources.registry import options

    for decorator in reversed([*options(), CONFIG_OPTION]):
        func = decorator(func)
    return func


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A float option's check: FloatRange lets nan through (every comparison with
    it is false)."""
    import math

    if value is not None and not math.isfinite(value):
        raise click.BadParameter("must be a finite number")
    return value


def refresh_option(polled: str) -> Callable[[F], F]:
    """The live commands' `--refresh SECONDS` (`polled`: what is polled, in words)."""
    return click.option(
        "--refresh",
        type=click.FloatRange(min=0.1, max=3600),
        default=2.0,
        show_default=True,
        metavar="SECONDS",
        callback=finite,
        help=f"How often {polled} are polled.",
    )


def history_options(path_help: str, none_help: str) -> Callable[[F], F]:
    """The live commands' `--history PATH|DSN` and `--no-history`."""
    path = click.option(
        "--history", "history_path", metavar="PATH|DSN", default=None, help=path_help
    )
    none = click.option("--no-history", is_flag=True, help=none_help)
    return lambda func: path(none(func))


def start_history(values: Mapping[str, Any], tables: Mapping[str, Any], host: str) -> Any:
    """The recorder a live command (`watch`, `serve`) runs from its history options
    (`--history`, `--no-history`, `--pg-log`, `--pg-server`), or None; a bad
    [history] table or an unreadable --pg-log is a UsageError, one line."""
    from lockwatch.history.base import HistoryError
    from lockwatch.history.settings import start_recorder

    try:
        return start_recorder(
            values["history_path"],
            values["no_history"],
            tables,
            poll_seconds=values["refresh"],
            host=host,
            logs=values["pg_logs"],
            log_server=values["pg_server"],
        )
    except HistoryError as exc:
        raise click.UsageError(str(exc)) from exc


def sources_section(formatter: click.HelpFormatter, title: str, ids: bool = False) -> None:
    """Every registered source, its name (`ids`: its lock ids' prefix) and
    summary, as a --help section: a new source's line comes with its registry
    entry (its declaration's `summary`; no plugin is loaded for it)."""
    from lockwatch.sources.registry import help_rows

    with formatter.section(title):
        formatter.write_dl(help_rows(ids))


class SourcesListed(click.Command):
    """A command that looks at the sources (`ls`, `watch`, `serve`): its --help
    ends with the list of them, from the registry."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        sources_section(formatter, "Sources (each with its options above)")


class Targets(NamedTuple):
    sources: list[tuple[Source, Selected]]  # what this run looks at, configured
    config: Config
    wanted: Wanted | None = None  # what was asked (None: built by hand)

    def hints(self) -> list[Hint]:
        """What the sources tell an empty dashboard (contract.Hinting): what they
        looked for, and what they could show that is not shown, with its flag."""
        from lockwatch.sources.contract import Hinting
        from lockwatch.sources.registry import SOURCES, with_others_asked

        if self.wanted is None:
            return []
        running = {source.name for source, _ in self.sources}
        # As the registry's select sees it: PATHs default to "." only when no other
        # source was asked for.
        wanted = with_others_asked(self.wanted)
        said = []
        for source in SOURCES:
            if isinstance(source, Hinting):
                hint = source.hint(wanted, source.name in running)
                if hint is not None:
                    said.append(hint)
        return said

    def roots(self) -> tuple[str, ...]:
        """The lock trees looked at ((): none)."""
        from lockwatch.sources.contract import Walking

        for _, selected in self.sources:
            if isinstance(selected, Walking):
                return selected.lock_trees
        return ()


def resolve_targets(values: Mapping[str, Any], config_path: str | None) -> Targets:
    """The sources `values` (the command's parameters) and the config ask for:
    the config file read here, with each source's tables read by the registry."""
    from lockwatch.config import ConfigError
    from lockwatch.sources.registry import load_config
    from lockwatch.sources.secrets import hide_url_passwords

    # A URL's password in any option (--remote refuses them, and says so) leaves
    # `ps` before anything else; the sources' own options have hidden theirs.
    hide_url_passwords([str(v) for value in values.values() for v in _each(value)])
    try:
        os.getcwd()
    except FileNotFoundError:
        raise click.UsageError("the current directory no longer exists; cd somewhere") from None
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    return select_targets(values, config, os.environ)


def _each(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


def select_targets(
    values: Mapping[str, Any], config: Config, environ: Mapping[str, str]
) -> Targets:
    """The sources `values` and `config` ask for (bad values: a usage error)."""
    from lockwatch.sources.contract import SourceError, Wanted
    from lockwatch.sources.registry import select

    wanted = Wanted(tuple(values.get("paths") or ()), values, config, environ)
    try:
        return Targets(select(wanted), config, wanted)
    except SourceError as exc:
        raise click.UsageError(str(exc)) from exc


def warn_if_key_beside_log(key: Path, log: Path) -> None:
    """A warning on stderr when the audit key is kept beside its log."""
    from lockwatch.actions.audit_key import key_beside_log
    from lockwatch.cli.table import printable

    warning = key_beside_log(key, log)
    if warning is not None:
        click.echo(f"lockwatch: {printable(warning)}", err=True)
