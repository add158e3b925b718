"""`lockwatch serve`: the dashboard's collectors, headless, for Prometheus
(/metrics) and for other lockwatches (/v1/locks)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from lockwatch.cli.pglog import PG_LOG_OPTION, PG_SERVER_OPTION
from lockwatch.cli.where import (
    SourcesListed,
    history_options,
    refresh_option,
    resolve_targets,
    start_history,
    target_options,
)

SERVE_EPILOG = """\b
Endpoints (read-only: GET and HEAD; nothing can be done through them):
  /metrics    Prometheus metrics (lockwatch_locks, lockwatch_lock_stale, ...)
  /v1/locks   the lockwatch.ls/1 document, as `lockwatch ls --json` prints it
  /healthz    200 once every source has been read through (503 before), while
              collection runs

\b
Security: anything but a loopback address needs --token-file; clients send
`Authorization: Bearer <token>` (Prometheus: authorization.credentials_file).
--open-metrics leaves /metrics open; /v1/locks always needs the token then.
The listener speaks plain HTTP: across networks, put TLS in front of it.

\b
Exit status: 0 stopped by SIGTERM or SIGINT; 2 a bad option or config, or the
address cannot be listened on.

\b
Examples:
  lockwatch serve /srv/locks --pg postgresql://monitor@localhost/app
  lockwatch serve /srv/locks --listen 0.0.0.0:9464 --token-file /etc/lockwatch/serve.token
  lockwatch --remote http://db1:9464 --remote http://db2:9464   # one dashboard, many hosts
  lockwatch ls --remote http://db1:9464 --json                    # merged, with a host per lock
"""


@click.command(
    "serve",
    cls=SourcesListed,
    short_help="Serve locks to Prometheus (/metrics) and other lockwatches (/v1/locks).",
    epilog=SERVE_EPILOG,
)
@target_options
@click.option(
    "--listen",
    metavar="HOST:PORT",
    default=None,
    help="Where to listen [default: 127.0.0.1:9464; config: serve.listen]. Port 0: any free"
    " port (printed on stderr).",
)
@click.option(
    "--token-file",
    metavar="FILE",
    default=None,
    help="A file holding the bearer token clients must send [config: serve.token_file];"
    " required to listen on anything but loopback.",
)
@click.option(
    "--open-metrics",
    is_flag=True,
    help="Serve /metrics without the token (/v1/locks still needs it) [config:"
    " serve.open_metrics].",
)
@click.option(
    "--max-lock-series",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="At most N stale locks get series of their own (oldest first);"
    " lockwatch_lock_series_dropped counts the rest [default: 500; config:"
    " serve.max_lock_series].",
)
@refresh_option("servers, the kernel and remotes")
@history_options(
    "Record the lock history here: a SQLite file or a postgresql:// DSN [default: the"
    " user state directory's history.sqlite3; config: history.path].",
    "Record no history.",
)
@PG_LOG_OPTION
@PG_SERVER_OPTION
def serve(**values: Any) -> None:
    """Watch locks as the dashboard does, headless, and serve them over HTTP:
    lock files under PATHs (default: the current directory), PostgreSQL
    servers, the kernel's locks and every other source, for Prometheus
    (/metrics, with the alert rules in docs/prometheus/lockwatch-rules.yml)
    and for `lockwatch --remote` and `lockwatch ls --remote` on other hosts
    (/v1/locks)."""
    from lockwatch.serve.app import EXIT_USAGE, ServeError, run
    from lockwatch.serve.settings import SettingsError, resolve

    targets = resolve_targets(values, values.get("config_path"))
    try:
        settings = resolve(values, targets.config.tables, targets.config.where)
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from exc
    from lockwatch.clock import SystemClock

    clock = SystemClock()
    host = os.uname().nodename
    # The history first: a bad [history] table or a --pg-log that cannot be read
    # is one line before any feed starts.
    recorder = start_history(values, targets.config.tables, host)
    feeds = [
        (source.name, feed)
        for source, selected in targets.sources
        for feed in selected.feeds(clock, host)
    ]
    watched = ", ".join(dict.fromkeys(source.name for source, _ in targets.sources))
    try:
        code = run(feeds, settings, host=host, clock=clock, describe=watched, recorder=recorder)
    except ServeError as exc:
        click.echo(f"lockwatch serve: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(code)
