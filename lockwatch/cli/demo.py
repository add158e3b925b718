"""`lockwatch demo`: a playground of real processes fighting over locks, and the
dashboard on it. The show itself is `lockwatch.demo.Demo`; this is its command line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from lockwatch.cli.watch import _check_view_options, _need_terminal, build_app
from lockwatch.cli.where import file_option, select_targets

if TYPE_CHECKING:
    from lockwatch.demo import Demo
    from lockwatch.ui.app import LockwatchApp

DEMO_EPILOG = """\b
What it starts, in a temporary workspace (all real processes, each in its
own process group, logging to the workspace's logs/):
  clawdbot      three sessions sharing memory/.lock, backing off from each
                other; a fourth holder SIGKILLed after 3 s: its lock is stale
  gitclaw       runs for issues 42 and 17 taking per-issue session locks; the
                lock of a run for issue 7 cancelled 12 minutes ago (stale)
  tower-fleet   executors heartbeating; one hangs and its lock goes stale on
                screen; one writes ttl_seconds as a string (invalid)
  little-loops  two loops with overlapping scopes (scope_conflict), and a
                --queue loop waiting its turn behind another
  PostgreSQL    advisory locks held and awaited (bigint and pair keys, named
                in the workspace's lockwatch.toml), a row held by a session
                idle in transaction with two waiters, a three-deep blocking
                chain (tab: the Contention view)

\b
PostgreSQL runs on an embedded throwaway server from the pgserver package
(pip install 'lockwatch[demo]'); --pg DSN uses yours instead, where the demo
creates only its own table and sessions and drops them on exit. With neither,
the demo shows lock files only.

\b
Practise: break the stale locks, steal the hung executor's, then read the audit
log: lockwatch audit --audit-log WORKSPACE/audit.jsonl (run with --keep).

\b
On the way out (q, Ctrl+C, a crash) everything the demo started is stopped:
children, sessions, the embedded server; the workspace is removed unless --keep.

\b
Examples:
  lockwatch demo                           every lock state on screen in ~10 s
  lockwatch demo --keep                    keep the workspace: locks, logs, audit log
  lockwatch demo --pg postgresql://me@localhost/scratch
  lockwatch demo --audit-log ~/demo-audit.jsonl --theme incident
"""


def _check_dsn(dsn: str) -> None:
    from lockwatch.demo.postgres import unusable

    why = unusable(dsn)
    if why is not None:
        raise click.BadParameter(why, param_hint="--pg")


@click.command(
    "demo",
    short_help="A live playground: real processes contending for locks.",
    epilog=DEMO_EPILOG,
)
@click.option(
    "--pg",
    "pg_dsn",
    metavar="DSN",
    default=None,
    help="Contend on this PostgreSQL server instead of an embedded one: only the demo's"
    " own table and sessions, dropped on exit.",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the workspace (lock files, the children's logs, the audit log) on exit.",
)
@file_option(
    "--audit-log",
    "Where breaks and steals are audited [default: audit.jsonl in the workspace].",
    metavar="FILE",
)
@click.option(
    "--theme",
    metavar="NAME",
    default=None,
    help="Colour theme: lockwatch-dark (default), lockwatch-light, incident, or one of yours.",
)
def demo(pg_dsn: str | None, keep: bool, audit_log: Path | None, theme: str | None) -> None:
    """Start a playground where real processes take, hold, lose and fight over
    locks the way clawdbot, gitclaw, tower-fleet, little-loops and PostgreSQL
    applications do, and open the dashboard on it: active, stale, invalid,
    waiting and conflicting locks, live, within about 10 seconds.
    """
    from lockwatch.cli.act import readonly_reason
    from lockwatch.config import ConfigError, load

    quiet_runtime_dir_warning(os.environ)
    try:  # the operator's own config may say read-only; the demo's has no say in it
        readonly = readonly_reason(load()) is not None
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    themes = _check_view_options(theme, "")
    if pg_dsn is not None:
        _check_dsn(pg_dsn)
    _need_terminal()
    from lockwatch.demo import Demo, DemoError, PgSetupError

    def say(message: str) -> None:
        click.echo(message, err=True)

    running = Demo(
        pg_dsn=pg_dsn,
        keep=keep,
        audit_log=audit_log.absolute() if audit_log is not None else None,
        say=say,
    )
    app: LockwatchApp | None = None
    code = 0
    try:
        with _signals_quit(lambda: app), running:
            say(running.describe())
            log = running.audit_log
            say(f"lockwatch demo: breaks and steals are audited in {log}"
                f" (lockwatch audit --audit-log {log})")  # fmt: skip
            if running.pg_missing is not None and pg_dsn is None:
                say(
                    f"lockwatch demo: no PostgreSQL ({running.pg_missing}): lock files only."
                    " For waiters and blocking trees: pip install 'lockwatch[demo]',"
                    " or lockwatch demo --pg DSN."
                )
            app = demo_app(
                running,
                host=os.uname().nodename,
                theme=theme,
                themes=themes,
                readonly=readonly,
            )
            app.run()
            code = app.return_code or 0
    except PgSetupError as exc:
        raise click.BadParameter(str(exc), param_hint="--pg") from None
    except DemoError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        for line in running.report:
            say(line)
    sys.exit(code)


# platformdirs' RuntimeDirWarning ("XDG_RUNTIME_DIR is not set, falling back to
# …"): pgserver asks for a runtime directory, in the demo's process and in any
# Python it starts. Root's login often has no XDG_RUNTIME_DIR, and the fallback is
# fine for a throwaway server: the operator is not told about it.
_RUNTIME_DIR_WARNING = "ignore:XDG_RUNTIME_DIR"


def quiet_runtime_dir_warning(environ: MutableMapping[str, str]) -> None:
    """Silence the warning here and, through PYTHONWARNINGS, in the Pythons the demo starts."""
    import warnings

    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
    given = environ.get("PYTHONWARNINGS", "")
    if _RUNTIME_DIR_WARNING not in given.split(","):
        environ["PYTHONWARNINGS"] = (
            f"{given},{_RUNTIME_DIR_WARNING}" if given else _RUNTIME_DIR_WARNING
        )


def demo_app(running: Demo, *, host: str, **view: Any) -> LockwatchApp:
    """The dashboard on a started demo: its lock tree, its server (polled every
    second, holders idle for 8 s stale), its advisory key names and its audit log.
    On a server someone named (--pg), only the demo's own sessions can be acted on:
    other applications share it, and the demo's 8 s idle rule is not theirs."""
    if running.pg_info is not None and not running.pg_info.embedded:
        view.setdefault("given", {"pg_applications": running.pg_info.application})
    # The demo's own servers only: no LOCKWATCH_PG or PG* from the environment.
    targets = select_targets(
        {
            "paths": tuple(running.roots),
            "pg_dsns": tuple(running.dsns),
            "pg_idle_after": running.pg_idle_after,
            "refresh": running.refresh,
        },
        running.config,
        environ={},
    )
    return build_app(targets, host=host, audit_log=running.audit_log, **view)


@contextlib.contextmanager
def _signals_quit(current: Callable[[], LockwatchApp | None]) -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) end the demo the way `q` does, so that it
    cleans up: the dashboard is asked to exit, or, before it runs, the start is cut
    short with KeyboardInterrupt (the Demo undoes whatever had started)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        app = current()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if app is not None and loop is not None:
            loop.call_soon_threadsafe(app.exit)
            return
        raise KeyboardInterrupt

    signums = (signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
