"""`lockwatch audit`: read the audit log; `lockwatch audit verify`: check its chain."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from lockwatch.cli.where import AUDIT_LOG_OPTION, CONFIG_OPTION


def _log_path(given: Path | None, config_path: str | None) -> Path:
    from lockwatch.actions.audit import log_path
    from lockwatch.config import ConfigError, load

    if given is not None:
        return given
    try:
        config = load(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    return log_path(None, config.audit_log)


def _need(path: Path) -> None:
    from lockwatch.actions.audit import head_path

    if not path.exists():
        if head_path(path).exists():
            # Its head says records were written: a log that vanished was removed.
            click.echo(
                f"lockwatch: {path}: TAMPERED: the log is gone but its head"
                f" {head_path(path).name} says records were written",
                err=True,
            )
            sys.exit(1)
        click.echo(f"lockwatch: no audit log at {path} (nothing has been audited there)", err=True)
        sys.exit(2)
    if not path.is_file():
        # A FIFO would block the reader forever; a directory is no log either.
        click.echo(f"lockwatch: {path} is not a regular file, so not an audit log", err=True)
        sys.exit(2)


@click.group(
    "audit",
    invoke_without_command=True,
    short_help="Show the audit log of break/steal/release/cancel; verify its chain.",
    epilog="""\b
Each record: seq, time, event, operator (and os_user, sudo_user), host,
lockwatch_pid, target, previous_lock and previous_lock_hash, reason, result,
prev_hash and hash. Events: action_intent (written before acting), then
lock_broken, lock_stolen, lock_released, backend_terminated,
backend_cancelled, action_refused or action_failed.

\b
Examples:
  lockwatch audit                       # the log, newest last
  lockwatch audit --json | jq '.[] | select(.event=="lock_broken")'
  lockwatch audit verify || page-security
""",
)
@AUDIT_LOG_OPTION
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True, help="Every record, as a JSON array.")
@click.pass_context
def audit(
    ctx: click.Context, audit_log: Path | None, config_path: str | None, as_json: bool
) -> None:
    """Print the audit log: every action taken, refused or failed."""
    ctx.obj = (audit_log, config_path)
    if ctx.invoked_subcommand is not None:
        return
    from lockwatch.actions.audit import read_records

    path = _log_path(audit_log, config_path)
    _need(path)
    try:
        records = list(read_records(path))
    except OSError as exc:
        click.echo(f"lockwatch: cannot read {path}: {exc.strerror}", err=True)
        sys.exit(2)
    if as_json:
        import orjson

        parsed: list[Any] = [
            record
            if record is not None
            else {"line": number, "unparseable": raw.decode(errors="replace")}
            for number, record, raw in records
        ]
        click.echo(orjson.dumps(parsed, option=orjson.OPT_INDENT_2).decode())
        return
    _print_table(records)


def _print_table(records: list[tuple[int, dict[str, Any] | None, bytes]]) -> None:
    from lockwatch.cli.table import printable

    if not records:
        click.echo("the audit log is empty")
        return
    for number, record, _raw in records:
        if record is None:
            click.echo(f"{number:>5}  (not a JSON record)")
            continue
        target = record.get("target") or {}
        where = target.get("path") or target.get("id") or "?"
        event = str(record.get("event", "?"))
        if event == "action_intent":
            event = f"intent:{record.get('intent', '?')}"
        text = record.get("message") or record.get("effect") or ""
        line = (
            f"{record.get('seq', '?'):>5}  {str(record.get('time', ''))[:19]}  {event:<22}"
            f" {record.get('operator', '?'):<12} {where}"
        )
        click.echo(printable(line))
        details = f"reason: {record.get('reason', '')}"
        if text:
            details += f" · {text}"
        click.echo("       " + printable(details))


@audit.command("verify")
@AUDIT_LOG_OPTION
@CONFIG_OPTION
@click.pass_context
def verify(ctx: click.Context, audit_log: Path | None, config_path: str | None) -> None:
    """Check every record's hash, the hash chain, the sequence, and the head:
    exit 1 naming the first record that was edited, removed or reordered."""
    from lockwatch.actions.audit import verify as check

    parent_log, parent_config = ctx.obj or (None, None)
    path = _log_path(audit_log or parent_log, config_path or parent_config)
    _need(path)
    try:
        result = check(path)
    except OSError as exc:
        click.echo(f"lockwatch: cannot read {path}: {exc.strerror}", err=True)
        sys.exit(2)
    if result.ok:
        click.echo(f"{path}: {result.records} records, chain intact")
        return
    where = []
    if result.seq is not None:
        where.append(f"record {result.seq}")
    if result.line is not None:
        where.append(f"line {result.line}")
    place = f" at {', '.join(where)}" if where else ""
    click.echo(
        f"lockwatch: {path}: TAMPERED{place}: {result.problem}"
        f" ({result.records} records verified before it)",
        err=True,
    )
    sys.exit(1)
