"""`lockwatch history`: the episodes the history recorded, worst first; `history
show ID`: one episode's timeline. Also the readers behind `ls --at` and
`why --at` (imported only when those flags are given)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import click
import orjson

from lockwatch.cli.ending import fail, finish
from lockwatch.cli.pglog import PG_LOG_OPTION, PG_SERVER_OPTION
from lockwatch.model.text import terminal_safe

EXIT_NO_HISTORY = 2

history_option = click.option(
    "--history",
    "history_path",
    metavar="PATH|DSN",
    default=None,
    help="The history to read: a SQLite file (default: the user state directory's"
    " history.sqlite3, or [history] path) or a postgresql:// DSN.",
)


def when(text: str | None, label: str) -> datetime | None:
    if text is None:
        return None
    from lockwatch.model.when import BadTime, parse_when

    now = datetime.now().astimezone()
    try:
        return parse_when(text, now, now.tzinfo)
    except BadTime as exc:
        fail(f"{label}: {exc}", EXIT_NO_HISTORY)


def configured_target(given: str | None) -> str | None:
    """--history, else [history] path in the config, else None (the default file)."""
    if given:
        return given
    try:
        from lockwatch.config import load

        config = load(None)
    except Exception:  # noqa: BLE001 - a broken config is said by the commands that use it
        return None
    table: Any = config.tables.get("history") if hasattr(config.tables, "get") else None
    path = table.get("path") if table is not None and hasattr(table, "get") else None
    return path if isinstance(path, str) and path.strip() else None


def open_reader(given: str | None) -> Any:
    from lockwatch.history.api import HistoryError, open_history

    try:
        return open_history(configured_target(given))
    except HistoryError as exc:
        fail(str(exc), EXIT_NO_HISTORY)


@click.group(
    "history",
    invoke_without_command=True,
    short_help="What blocked whom, from when to when (the recorded history).",
    epilog="""\b
Times: RFC 3339 (2026-12-07T03:12:07Z), HH:MM[:SS] (today, local time), or
-15m / -2h / -1d (that long ago).

\b
Exit status:
  0  listed (none found included)
  2  no history there, it cannot be read (corrupt, newer, writable by others),
     or a bad option

\b
Examples:
  lockwatch history --since -1h               # the last hour's episodes, worst first
  lockwatch history --since 03:00 --until 03:30 --source postgres
  lockwatch history --json | jq '.episodes[0].waiters'
  lockwatch history show 3f2a1b9c04de         # one episode's timeline
  lockwatch history --history postgresql://lockwatch@db/history   # a fleet's
  lockwatch history --pg-log /var/log/postgresql/postgresql-15-main.log \\
      --pg-server monitor@db1:5432/app        # PostgreSQL's own log of its waits too
""",
)
@history_option
@click.option("--since", metavar="T", help="From this time (default: a day ago).")
@click.option("--until", metavar="T", help="Up to this time (default: now).")
@click.option("--source", metavar="S", help="Only this source's (postgres, kernel, file, …).")
@click.option("--json", "as_json", is_flag=True, help='Print {"episodes": [...]}.')
@PG_LOG_OPTION
@PG_SERVER_OPTION
@click.pass_context
def history(ctx: click.Context, /, **values: Any) -> None:
    """List lock episodes: one root blocker and everyone who waited behind it,
    from the first wait to the last, worst first (waiter-seconds); and the
    trails of locks that were stale or invalid with nobody waiting.

    The dashboard and `lockwatch serve` record the history (on by default;
    --no-history turns it off)."""
    ctx.ensure_object(dict)
    ctx.obj["history_path"] = values["history_path"]
    if ctx.invoked_subcommand is not None:
        return
    since = when(values["since"], "--since") or datetime.now().astimezone() - timedelta(days=1)
    until = when(values["until"], "--until")
    if values["pg_logs"]:
        from lockwatch.cli.pglog import fold_logs

        target = configured_target(values["history_path"])
        fold_logs(target, values["pg_logs"], values["pg_server"])
    store = open_reader(values["history_path"])
    from lockwatch.history.api import HistoryError

    try:
        found = store.episodes(since, until, values["source"])
    except HistoryError as exc:
        fail(str(exc), EXIT_NO_HISTORY)
    if values["as_json"]:
        from lockwatch.history.document import episode_json

        document = {"episodes": [episode_json(episode) for episode in found]}
        sys.stdout.buffer.write(orjson.dumps(document) + b"\n")
        sys.stdout.flush()
        finish(0)
    _print_table(found)
    finish(0)


def _print_table(found: list[Any]) -> None:
    from lockwatch.history.document import blocker_words, clock, ending_words
    from lockwatch.model.humanize import duration

    if not found:
        click.echo("No episodes recorded in that time.")
        return
    header = ("ID", "START", "END", "SOURCE", "RESOURCE", "BLOCKER", "PEAK", "WAITED", "ENDED BY")
    rows = [header]
    for episode in found:
        rows.append(
            (
                episode.id,
                clock(episode.start),
                clock(episode.end),
                episode.source,
                episode.resource
                if episode.state is None
                else f"{episode.resource} ({episode.state})",
                blocker_words(episode.blocker, episode.start),
                str(episode.peak_waiters),
                duration(episode.waiter_seconds) if episode.waiter_seconds else "-",
                ending_words(episode),
            )
        )
    cut = [tuple(terminal_safe(cell)[:48] for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in cut) for i in range(len(header))]
    for row in cut:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


@history.command("show", short_help="One episode's timeline.")
@click.argument("episode_id")
@click.option("--json", "as_json", is_flag=True, help="Print the episode's JSON.")
@click.pass_context
def show(ctx: click.Context, episode_id: str, as_json: bool) -> None:
    """One episode: its blocker, and each waiter from when to when and how its
    wait ended."""
    from lockwatch.history.api import HistoryError
    from lockwatch.history.document import blocker_words, clock, episode_json, summary_line

    store = open_reader(ctx.obj.get("history_path"))
    try:
        episode = store.episode(episode_id)
    except HistoryError as exc:
        fail(str(exc), EXIT_NO_HISTORY)
    if episode is None:
        fail(f"no episode {episode_id} in {store.name}", EXIT_NO_HISTORY)
    if as_json:
        sys.stdout.buffer.write(orjson.dumps(episode_json(episode)) + b"\n")
        finish(0)
    say: Callable[[str], None] = lambda line: click.echo(terminal_safe(line))  # noqa: E731
    say(summary_line(episode))
    say(f"  {episode.source} {episode.server}: {episode.resource}")
    say(f"  blocker: {blocker_words(episode.blocker, episode.start)}")
    if episode.blocker.query:
        say(f"    {episode.blocker.query}")
    for waiter in episode.waiters:
        who = f"pid {waiter.pid}" if waiter.pid is not None else waiter.node
        app = f" ({waiter.application})" if waiter.application else ""
        said = waiter.outcome or "still waiting"
        say(f"  {clock(waiter.start)}-{clock(waiter.end)}  {who}{app}: {said}")
    finish(0)
