"""`lockwatch break | steal | cancel | release TARGET`: the dashboard's actions,
for scripts and for operators without a dashboard. Same rules, same audit log.
Each action kind's command is built from its entry in model/kinds.py (`command`)."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lockwatch.cli.ending import fail
from lockwatch.cli.where import (
    AUDIT_KEY_OPTION,
    AUDIT_LOG_OPTION,
    AUDIT_SYSLOG_OPTION,
    CONFIG_OPTION,
    OPERATOR_OPTION,
    TOMBSTONE_DIR_OPTION,
    warn_if_key_beside_log,
)
from lockwatch.model.action import Kind
from lockwatch.model.kinds import ActionKind
from lockwatch.model.lazyre import lazy_compile

if TYPE_CHECKING:
    from lockwatch.actions.plan import Plan
    from lockwatch.actions.run import Executor, Outcome
    from lockwatch.config import Config
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict
    from lockwatch.sources.contract import Found, Wanted

EXIT_DONE = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_FAILED = 3

ACT_EPILOG = """\b
TARGET is a lock file's path, or a lock id as `lockwatch ls --json` prints it:
its source's prefix (below) and what names the lock in that source
(file:/srv/locks/app.lock). A server's lock is looked up on its server: the
source's option above names it (with a password, if one is needed), else its
config table or variables, else the server the id itself names.

\b
Rules: a reason is required. Without --yes, lockwatch shows the lock and the
exact effect and asks; with no terminal and no --yes it refuses. The lock is
read again right before acting: if it changed since it was shown (or since
--expect-sha256), nothing is touched. Lock files are moved into a tombstone
directory (.lockwatch-broken/ beside them), never deleted. Every outcome is
appended to the audit log (`lockwatch audit`); if that log cannot be written,
nothing is done.

\b
Exit status:
  0  done
  1  refused: nothing was touched (changed, gone, not stale, not allowed)
  2  usage: bad option, no reason, a path that does not exist (not audited),
     no terminal without --yes, read-only
  3  failed part-way: the message says what state it left (also: done, but
     its result could not be written to the audit log; its intent was)
"""

_SHA256 = lazy_compile(r"(?:sha256:)?([0-9a-f]{64})", re.IGNORECASE)


def _sha(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    match = _SHA256.fullmatch(value.strip())
    if match is None:
        raise click.BadParameter("must be 64 hex digits (sha256), optionally after 'sha256:'")
    return match.group(1).lower()


_EXPECT_SHA256 = click.option(
    "--expect-sha256",
    metavar="HEX",
    callback=_sha,
    default=None,
    help="Act only if the lock's bytes still have this sha256 (from `ls --json`).",
)


def _pid_option(help: str) -> Callable[[Any], Any]:
    return click.option("--pid", type=click.IntRange(min=1), default=None, help=help)


def _sources_options(kind: Kind | None) -> list[Callable[[Any], Any]]:
    """The sources' own options of the action commands (`kind` None: those every
    command takes), in registry order."""
    from lockwatch.sources.registry import SOURCES

    return [option for source in SOURCES for option in source.action_options(kind)]


def _own(kind: Kind) -> Callable[[Any], Any]:
    """The `kind` command's options that a source owns (break: --signal)."""

    def decorate(func: Any) -> Any:
        for option in reversed(_sources_options(kind)):
            func = option(func)
        return func

    return decorate


def _common(func: Any) -> Any:
    options = [
        click.argument("target", metavar="TARGET"),
        click.option(
            "--reason",
            metavar="TEXT",
            default=None,
            help="Why (required): goes to the audit log with the lock as it was.",
        ),
        click.option("--yes", "-y", is_flag=True, help="Do not ask; act if the checks pass."),
        OPERATOR_OPTION,
        AUDIT_LOG_OPTION,
        AUDIT_KEY_OPTION,
        AUDIT_SYSLOG_OPTION,
        TOMBSTONE_DIR_OPTION,
        # Where a source's TARGETs live (--pg DSN, --redis URL, ...): its own options.
        *_sources_options(None),
        CONFIG_OPTION,
        click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass(frozen=True)
class Request:
    target: str
    reason: str | None
    yes: bool
    operator: str | None
    audit_log: Path | None
    tombstone_dir: str | None
    config_path: str | None
    as_json: bool
    force: bool = False
    expect_sha256: str | None = None
    pid: int | None = None
    audit_key: Path | None = None
    audit_syslog: str | None = None  # --audit-syslog[=required|best-effort]
    # The sources' own options' values (--pg, --signal), by click parameter name.
    given: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, options: dict[str, Any]) -> Request:
        names = {f.name for f in fields(cls)} - {"given"}
        mine = {name: value for name, value in options.items() if name in names}
        given = {name: value for name, value in options.items() if name not in names}
        return cls(**mine, given=given)


def command(kind: ActionKind) -> click.Command:
    """`lockwatch <its command> TARGET`: an action kind's command, built from its
    table entry (model/kinds.py) with the options every source registered now
    gives the action commands."""

    def act(**options: Any) -> None:
        _act(kind.kind, Request.of(options))

    decorators: list[Callable[[Any], Any]] = [_common]
    if kind.force_help is not None:
        decorators.append(click.option("--force", is_flag=True, help=kind.force_help))
    if kind.pid_help is not None:
        decorators.append(_pid_option(kind.pid_help))
    decorators.append(_own(kind.kind))
    if kind.expect_sha256:
        decorators.append(_EXPECT_SHA256)
    func: Any = act
    for decorate in reversed(decorators):
        func = decorate(func)
    made = click.command(
        kind.command, cls=_ActionCommand, short_help=kind.short_help, help=kind.doc,
        epilog=ACT_EPILOG,
    )  # fmt: skip
    return made(func)


class _ActionCommand(click.Command):
    """An action command, whose --help lists the sources a TARGET may be of: from
    the registry, so a new source's line comes with its entry."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from lockwatch.cli.where import sources_section

        super().format_epilog(ctx, formatter)
        sources_section(formatter, "Sources, by the prefix of their lock ids", ids=True)


# -- the shared flow -------------------------------------------------------------


def readonly_reason(config: Config, flag: bool = False) -> str | None:
    """Why actions are off in this run, if they are: --readonly (before the
    subcommand or on the dashboard), LOCKWATCH_READONLY, or the config."""
    context = click.get_current_context(silent=True)
    if flag or (context is not None and context.find_root().meta.get("--readonly")):
        return "--readonly"
    if os.environ.get("LOCKWATCH_READONLY", "") not in ("", "0"):
        return "LOCKWATCH_READONLY is set"
    if config.readonly:
        return "readonly = true in the config"
    return None


def _act(kind: Kind, request: Request) -> None:
    from lockwatch.actions.audit import AuditLog, Operator, key_path, log_path, syslog_anchor
    from lockwatch.clock import SystemClock
    from lockwatch.config import ConfigError
    from lockwatch.sources.registry import load_config as load

    try:
        config = load(request.config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    readonly = readonly_reason(config)
    if readonly:
        fail(f"read-only: {readonly}; no {kind.value} from here", EXIT_USAGE)
    if request.reason is None or not request.reason.strip():
        raise click.UsageError(
            "--reason is required: say why, for the audit log (e.g. --reason 'holder died,"
            " INC-123'); nothing was done"
        )
    if not request.target.strip():
        raise click.BadParameter("an empty TARGET", param_hint="TARGET")
    host = os.uname().nodename
    wanted = _wanted(request, config)
    # What TARGET names comes first: a mistyped path says so, not "pass --yes".
    found = _find(request.target, wanted, host, request.tombstone_dir or config.tombstone_dir)
    if not request.yes and not sys.stdin.isatty():
        raise click.UsageError(
            "no terminal to confirm on: pass --yes to act without asking; nothing was done"
        )
    clock = SystemClock()
    operator = Operator.identify(request.operator)
    audit_log, audit_key = (
        log_path(request.audit_log, config.audit_log),
        key_path(request.audit_key, config.audit_key),
    )
    warn_if_key_beside_log(audit_key, audit_log)
    audit = AuditLog(
        audit_log,
        clock=clock,
        host=host,
        operator=operator,
        key_path=audit_key,
        anchor=syslog_anchor(request.audit_syslog or config.audit_syslog),
    )
    executor = _executor(audit, request, config, wanted)
    if isinstance(found, str):
        # An id names a lock someone listed: its being gone is audited.
        from lockwatch.actions.targets import unseen_id

        named = unseen_id(request.target)
        _report(executor.unseen(kind, named, request.reason, found), request.as_json)
        return
    lock, verdict, peers = found
    the_plan = _plan(kind, lock, verdict, peers, request, operator.name, host, config)
    if not request.yes:
        _confirm(the_plan, request)
    outcome = executor.run(
        the_plan,
        request.reason,
        force=request.force,
        expect_sha256=request.expect_sha256,
    )
    if outcome.ok:
        from lockwatch.history.settings import note_action

        note_action(config.tables, host, lock, outcome.event, operator.name, outcome.audit_seq)
    if outcome.ok and outcome.held is not None:
        _report(outcome, request.as_json, finish=False)
        _hold(outcome, executor, the_plan, request.reason, request.as_json)
        return
    if outcome.ok and kind is Kind.STEAL and outcome.new_content is not None:
        pid = f"pid {request.pid}" if request.pid else f"pid {os.getppid()} (your shell)"
        click.echo(
            f"note: nothing heartbeats this lock. It records {pid}: a pid format stays"
            " active while that process lives; a heartbeat format goes stale after its"
            " ttl. Keep it alive from the dashboard (S there heartbeats it) or let it go"
            " with `lockwatch release`.",
            err=True,
        )
    _report(outcome, request.as_json)


def _wanted(request: Request, config: Config) -> Wanted:
    from lockwatch.sources.contract import Wanted

    return Wanted((), dict(request.given), config, os.environ)


def _executor(audit: Any, request: Request, config: Config, wanted: Wanted) -> Executor:
    """The executor, told how each source's actions reach its servers (from the
    sources' options and the config), as the dashboard's session is."""
    from lockwatch.actions.reach import reach
    from lockwatch.actions.run import Executor
    from lockwatch.sources.contract import SourceError

    try:
        reaching = reach(wanted)
    except SourceError as exc:
        fail(str(exc), EXIT_USAGE)
    return Executor(audit, tombstone_dir=request.tombstone_dir or config.tombstone_dir, **reaching)


def _find(target: str, wanted: Wanted, host: str, tombstone_dir: str | None) -> Found | str:
    from lockwatch.actions.targets import find, source_for
    from lockwatch.sources.contract import LookupFailed, SourceError
    from lockwatch.sources.registry import for_id

    try:
        actions = source_for(target).actions
        path = os.path.abspath(target)
        typed_path = actions is not None and actions.takes_paths and for_id(target) is None
        gone = typed_path and not os.path.lexists(path)
        if gone and not (actions is not None and actions.moved_aside(path, tombstone_dir)):
            # A path typed, not an id listed: nobody saw a lock there, so nothing
            # is audited (a typo is no action on a lock), as `ls` and the
            # dashboard refuse a PATH that does not exist. One broken into its
            # tombstone (by a racer done before this one looked) is a lock that is
            # gone: find() says so, and its refusal is audited.
            fail(f"{path}: no such file or directory; nothing was done", EXIT_USAGE)
        return find(target, wanted, host)
    except SourceError as exc:
        fail(str(exc), EXIT_USAGE)
    except LookupFailed as exc:
        fail(str(exc), EXIT_FAILED)
    raise AssertionError("unreachable")


def _plan(
    kind: Kind,
    lock: Lock,
    verdict: Verdict,
    peers: list[Lock],
    request: Request,
    operator: str,
    host: str,
    config: Config,
) -> Plan:
    from lockwatch.actions.plan import provider
    from lockwatch.actions.targets import prepare
    from lockwatch.clock import SystemClock
    from lockwatch.model.handover import NewHolder

    holder_pid = request.pid or os.getppid()
    if kind is Kind.STEAL and request.pid is not None and not _running(request.pid):
        fail(f"--pid {request.pid} is not a running process: the lock would be stale", EXIT_USAGE)
    new_holder = NewHolder(
        operator=operator,
        pid=holder_pid,
        own_pid=request.pid or os.getpid(),
        host=host,
        at=SystemClock().now(),
        token=uuid.uuid4().hex[:16],
        reason=" ".join((request.reason or "").split()),
    )
    held = held_elsewhere = False
    actions = provider(lock)
    if kind is Kind.RELEASE and actions is not None:
        # Only what lockwatch took for this operator: anyone else's is a break.
        holding = actions.holding(lock, operator, holder_pid)
        held, held_elsewhere = holding.held, holding.elsewhere
    return prepare(
        kind,
        lock,
        verdict,
        peers=peers,
        new_holder=new_holder,
        tombstone_dir=request.tombstone_dir or config.tombstone_dir,
        held=held,
        held_elsewhere=held_elsewhere,
        **request.given,
    )


def _running(pid: int) -> bool:
    from lockwatch.sources.processes import read_stat

    if pid <= 0:
        return False
    try:
        return read_stat(pid)[0] != "Z"
    except (OSError, ValueError, IndexError):
        return False  # gone, or hidden from us


def _confirm(the_plan: Plan, request: Request) -> None:
    from datetime import UTC, datetime

    from lockwatch.actions.plan import describe
    from lockwatch.cli.table import printable

    click.echo(f"About to {the_plan.verb}:", err=True)
    for label, value in describe(the_plan, datetime.now(UTC)):
        click.echo(f"  {label:>8}: {printable(value)}", err=True)
    if the_plan.refusal is not None or (the_plan.needs_name and not request.force):
        return  # refused below, and audited: no question to ask
    if not click.confirm(f"{the_plan.verb.capitalize()} it?", default=False, err=True):
        fail("cancelled; nothing was done", EXIT_REFUSED)


def _report(outcome: Outcome, as_json: bool, *, finish: bool = True) -> None:
    from lockwatch.cli.table import printable

    if as_json:
        import orjson

        payload = {
            "ok": outcome.ok,
            "event": outcome.event,
            "message": outcome.message,
            "code": outcome.code,
            "tombstone": outcome.tombstone,
            "new_lock_hash": f"sha256:{outcome.new_sha256}" if outcome.new_sha256 else None,
            "audited": outcome.audited,
        }
        click.echo(orjson.dumps(payload).decode())
    elif outcome.ok:
        click.echo(printable(outcome.message))
    else:
        label = "refused" if outcome.event == "action_refused" else "failed"
        click.echo(f"lockwatch: {label}: {printable(outcome.message)}", err=True)
    if not finish:
        return
    if outcome.ok and not outcome.audited:
        # Done, but its result could not be audited (its intent was): a script
        # must not take that for a clean success.
        sys.exit(EXIT_FAILED)
    if outcome.ok:
        sys.exit(EXIT_DONE)
    if outcome.code == "audit_unwritable":
        sys.exit(EXIT_REFUSED)
    sys.exit(EXIT_REFUSED if outcome.event == "action_refused" else EXIT_FAILED)


def _hold(outcome: Outcome, executor: Executor, the_plan: Plan, reason: str, as_json: bool) -> None:
    """Hold a stolen advisory lock in the foreground until Ctrl+C, SIGTERM, or
    `lockwatch release` ends this session."""
    from lockwatch.actions.plan import plan
    from lockwatch.model.verdict import State, Verdict

    held = outcome.held
    stop: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        stop.append(signum)

    # Handlers first: once the operator is told Ctrl+C releases it, it must.
    previous: dict[signal.Signals, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous[signum] = signal.signal(signum, on_signal)
    try:
        click.echo(
            f"holding {held.name} as lockwatch session {held.backend_pid}; Ctrl+C releases it"
            f" (or: lockwatch release '{held.lock_id}' --reason ...)",
            err=True,
        )
        while not stop:
            if not held.alive():
                click.echo("lockwatch: the lock was released (this session was ended)", err=True)
                sys.exit(EXIT_DONE)
            time.sleep(0.5)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    # What is released is lockwatch's own lock now, not the terminated holder's.
    mine = held.as_lock(the_plan.lock)
    release_plan = plan(Kind.RELEASE, mine, Verdict(State.ACTIVE, alive=True), held=True)
    done = executor.run(release_plan, f"{reason} (released on exit)", held=held)
    _report(done, as_json)
