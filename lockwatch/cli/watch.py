"""`lockwatch [PATH...]` / `lockwatch watch`: the live dashboard, and
`lockwatch replay FILE`: a recording played back through the same dashboard."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lockwatch.cli.pglog import PG_LOG_OPTION, PG_SERVER_OPTION
from lockwatch.cli.where import (
    AUDIT_KEY_OPTION,
    AUDIT_LOG_OPTION,
    AUDIT_SYSLOG_OPTION,
    OPERATOR_OPTION,
    TOMBSTONE_DIR_OPTION,
    SourcesListed,
    Targets,
    file_option,
    finite,
    history_options,
    refresh_option,
    resolve_targets,
    start_history,
    target_options,
)
from lockwatch.ui.keys import epilog

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from lockwatch.clock import Clock
    from lockwatch.sources.feed import Feed
    from lockwatch.ui.app import LockwatchApp

WATCH_EPILOG = (
    "\b\n"
    + epilog()
    + """

\b
Filter terms: free text (name, holder, host, format), state:stale,
source:pg, format:, name:, holder:, host:, pid:, actor:, reason:;
!term negates; all terms must match.

\b
Examples:
  lockwatch                            # locks under the current directory
  lockwatch /srv/locks ~/.loops        # several trees at once
  lockwatch --pg postgresql://monitor@db1/app --refresh 5
  lockwatch --filter 'state:stale !source:pg' --theme incident
  lockwatch /srv/locks --record incident.jsonl   # then: lockwatch replay incident.jsonl
"""
)


def _common(func: Any) -> Any:
    options = [
        click.option(
            "--theme",
            metavar="NAME",
            default=None,
            help="Colour theme: lockwatch-dark (default), lockwatch-light, incident, or one of"
            " yours in the user config dir's themes/ (t cycles them).",
        ),
        click.option(
            "--filter", "filter_text", metavar="TERMS", default="", help="Start filtered."
        ),
        click.option(
            "--sort",
            type=click.Choice(["state", "age", "name", "source"]),
            default="state",
            show_default=True,
            help="Start sorted by this column (s cycles).",
        ),
        click.option(
            "--export-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Where e writes incident snapshots [default: ~/.local/state/lockwatch/incidents].",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.command(
    "watch",
    cls=SourcesListed,
    short_help="The live dashboard (also: lockwatch [PATH]...).",
    epilog=WATCH_EPILOG,
)
@target_options
@refresh_option("servers and the kernel")
@file_option(
    "--record",
    "Append every snapshot the sources produce to FILE (JSON Lines) for replay.",
    metavar="FILE",
)
@history_options(
    "Record the lock history here (a SQLite file or a postgresql:// DSN) [default:"
    " history.sqlite3 in the user state directory; config: history.path].",
    "Record no lock history.",
)
@PG_LOG_OPTION
@PG_SERVER_OPTION
@click.option(
    "--at",
    "at_text",
    metavar="TIME",
    default=None,
    help="Open on the board as the history recorded it at TIME (RFC 3339, HH:MM[:SS] today,"
    " or -15m/-2h/-1d); [ ] step, @ seeks, L returns live.",
)
@click.option(
    "--readonly",
    is_flag=True,
    help="No break, steal, release or cancel: the action keys are gone (also: readonly ="
    " true in the config, or LOCKWATCH_READONLY=1).",
)
@AUDIT_LOG_OPTION
@AUDIT_KEY_OPTION
@AUDIT_SYSLOG_OPTION
@OPERATOR_OPTION
@TOMBSTONE_DIR_OPTION
@_common
def watch(**values: Any) -> None:
    """Watch locks live: lock files under PATHs (default: the current
    directory) and the locks of every source below that its options or the
    config name.

    Files are watched for changes (a new, changed or removed lock shows within
    a quarter of a second) and read again in full every 30 s; servers and the
    kernel are polled every --refresh seconds. Ages and countdowns tick every
    second.
    """
    targets = resolve_targets(values, values.get("config_path"))
    _check_paths(values.get("paths") or ())
    _check_filter(values["filter_text"])
    # A theme named here is checked before anything starts; the themes otherwise
    # load after the feeds start (they import the UI toolkit): a first scan, in
    # forked workers, runs meanwhile.
    themes = None if values["theme"] is None else _check_theme(values["theme"])
    at = _check_at(values, targets)
    _need_terminal()
    from lockwatch.cli.act import readonly_reason

    readonly = readonly_reason(targets.config, values["readonly"]) is not None
    host = os.uname().nodename
    # The feeds first: a file feed's first scan starts now, in forked workers, while
    # one thread runs (the recorder's is another) and the dashboard is imported.
    feeds = start_feeds(targets, host)
    if themes is None:
        themes = _load_themes()
    recorder = None
    record: Path | None = values["record"]
    if record is not None:
        from lockwatch.sources.recording import Recorder, RecordingError

        try:
            recorder = Recorder(record, host=host)
        except RecordingError as exc:
            from lockwatch.cli.ending import fail

            _abandon(feeds[1])  # its workers scan for nobody now
            fail(f"--record: {exc}", 2)  # one line: the path is someone else's text
    try:
        history = start_history(values, targets.config.tables, host)
    except click.UsageError:
        _abandon(feeds[1])
        raise
    from lockwatch.cli.travel import reader_for

    app = build_app(
        targets,
        host=host,
        feeds=feeds,
        recorder=recorder,
        history=history,
        history_reader=None if history is None else reader_for(history.target),
        at=at,
        readonly=readonly,
        audit_log=values["audit_log"],
        audit_key=values["audit_key"],
        audit_syslog=values["audit_syslog"],
        operator=values["operator"],
        tombstone_dir=values["tombstone_dir"],
        theme=values["theme"],
        filter_text=values["filter_text"],
        sort=values["sort"],
        export_dir=values["export_dir"],
        themes=themes,
    )
    app.run()
    sys.exit(app.return_code or 0)


@click.command(
    "replay", short_help="Play a --record recording or a history store through the dashboard."
)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--at",
    "at_text",
    metavar="TIME",
    default=None,
    help="A history store: open at TIME (RFC 3339, HH:MM[:SS], -15m) [default: its last change].",
)
@click.option(
    "--speed",
    type=click.FloatRange(min=0.01, max=10000),
    default=1.0,
    show_default=True,
    callback=finite,
    help="Playback speed: 2 plays twice as fast as it happened.",
)
@click.option("--paused", is_flag=True, help="Start paused on the first snapshot (n steps).")
@_common
def replay(
    file: Path,
    at_text: str | None,
    speed: float,
    paused: bool,
    theme: str | None,
    filter_text: str,
    sort: str,
    export_dir: Path | None,
) -> None:
    """Replay FILE, written by `lockwatch --record FILE`, with the recorded
    times: ages, staleness and events are as they were during the incident.
    FILE may also be a lock history store (history.sqlite3): the board as it
    was recorded, stepped through its changes.

    \b
    Keys as in the dashboard, plus: p pause/resume · n step · + faster · - slower
    A history store: [ ] step back/forward through its changes · @ go to a time
    """
    from lockwatch.sources.recording import RecordingError, ReplayFeed

    themes = _check_view_options(theme, filter_text)
    from lockwatch.cli.travel import history_replay, is_history_file

    if is_history_file(file):
        store_app = history_replay(
            file, at_text, theme=theme, filter_text=filter_text, sort=sort,
            export_dir=export_dir, themes=themes,
        )  # fmt: skip
        _need_terminal()
        store_app.run()
        sys.exit(store_app.return_code or 0)
    if at_text is not None:
        raise click.UsageError("--at needs a history store (a recording replays from its start)")
    try:
        feed = ReplayFeed.open(file, speed=speed, paused=paused)
    except RecordingError as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from exc
    _need_terminal()
    from lockwatch.ui.app import ReplayApp

    app = ReplayApp(
        [feed],
        clock=feed.clock,
        host=feed.host,
        theme=theme,
        filter_text=filter_text,
        sort=sort,
        replay=feed,
        export_dir=export_dir,
        themes=themes,
    )
    app.run()
    sys.exit(app.return_code or 0)


def build_app(
    targets: Targets,
    *,
    host: str,
    readonly: bool = False,
    audit_log: Path | None = None,
    operator: str | None = None,
    tombstone_dir: str | None = None,
    given: Mapping[str, Any] | None = None,
    audit_key: Path | None = None,
    audit_syslog: bool | str | None = None,
    feeds: tuple[Clock, list[Feed]] | None = None,
    **view: Any,
) -> LockwatchApp:
    """The dashboard on `targets` (every selected source's live feeds) and
    (unless `readonly`) break/steal/release audited to `audit_log`; `view` goes
    to LockwatchApp as is (theme, filter_text, sort, recorder, ...). `feeds`: the
    clock and feeds `start_feeds` made, else they are made here."""
    clock, live = feeds or start_feeds(targets, host)
    from lockwatch.ui.app import LockwatchApp

    actions = None
    if not readonly:
        from lockwatch.actions.audit import key_path, log_path, syslog_anchor
        from lockwatch.actions.session import ActionSession

        actions = ActionSession(
            clock=clock,
            host=host,
            roots=targets.roots(),
            audit_log=log_path(audit_log, targets.config.audit_log),
            operator=operator,
            tombstone_dir=tombstone_dir or targets.config.tombstone_dir,
            reach=_reach(targets),
            given=given,
            audit_key=key_path(audit_key, targets.config.audit_key),
            audit_anchor=syslog_anchor(audit_syslog or targets.config.audit_syslog),
        )
    return LockwatchApp(
        live,
        clock=clock,
        host=host,
        actions=actions,
        readonly=readonly,
        hints=targets.hints,
        **view,
    )


def _reach(targets: Targets) -> dict[str, Any]:
    """How the dashboard's actions reach the servers of the sources it shows: as
    the action commands reach them, from the same options and config."""
    from lockwatch.actions.reach import reach
    from lockwatch.sources.contract import SourceError, Wanted

    wanted = targets.wanted or Wanted((), {}, targets.config, os.environ)
    try:
        return reach(wanted, [source for source, _ in targets.sources])
    except SourceError as exc:
        raise click.UsageError(str(exc)) from exc


def _check_at(values: Mapping[str, Any], targets: Targets) -> datetime | None:
    """--at: a time, and a history to read it from (checked before anything
    starts: one line, exit 2)."""
    if values["at_text"] is None:
        return None
    if values["no_history"]:
        raise click.UsageError("--at reads the lock history: it cannot go with --no-history")
    from lockwatch.cli.travel import check_readable, configured, parse_at

    at = parse_at(values["at_text"], "--at")
    check_readable(configured(values["history_path"], targets.config.tables), "--at")
    return at


def _abandon(feeds: list[Feed]) -> None:
    """Close feeds that will never run (their first scans' workers stop)."""
    import asyncio

    async def close_all() -> None:
        for feed in feeds:
            await feed.close()

    asyncio.run(close_all())


def start_feeds(targets: Targets, host: str) -> tuple[Clock, list[Feed]]:
    """Every selected source's live feeds, on the system clock."""
    from lockwatch.clock import SystemClock

    clock = SystemClock()
    return clock, [feed for _, selected in targets.sources for feed in selected.feeds(clock, host)]


def _check_view_options(theme: str | None, filter_text: str) -> Any:
    _check_filter(filter_text)
    return _load_themes() if theme is None else _check_theme(theme)


def _check_filter(filter_text: str) -> None:
    from lockwatch.model.query import QueryError, parse
    from lockwatch.sources.registry import source_names

    try:
        parse(filter_text, source_names())
    except QueryError as exc:
        raise click.BadParameter(str(exc), param_hint="--filter") from exc


def _load_themes() -> Any:
    from lockwatch.ui.themes import load_all

    themes, warnings = load_all()
    for warning in warnings:
        click.echo(f"lockwatch: theme skipped: {warning}", err=True)
    return themes


def _check_theme(theme: str) -> Any:
    themes = _load_themes()
    if theme not in themes:
        known = ", ".join(sorted(themes))
        raise click.BadParameter(f"no theme {theme!r}; one of: {known}", param_hint="--theme")
    return themes


def _check_paths(paths: Sequence[str]) -> None:
    """`ls`'s rule: a PATH named that does not exist or cannot be read is an
    error (exit 2), said before anything starts, not a live dashboard of
    nothing. (A watched path that goes away later is shown, not an error.)"""
    from lockwatch.cli.table import printable

    said = [f"lockwatch: {printable(path)}: {why}" for path in paths if (why := _unreadable(path))]
    for line in said:
        click.echo(line, err=True)
    if said:
        sys.exit(2)


def _unreadable(path: str) -> str | None:
    """Why `path` cannot be watched (its error's words, as `ls` says them), or None."""
    try:
        if os.path.isdir(path):
            with os.scandir(path):
                return None
        os.stat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise click.UsageError(
            "the dashboard needs a terminal; in scripts use `lockwatch ls` (--json for machines)"
        )
