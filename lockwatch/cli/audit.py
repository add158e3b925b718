"""`lockwatch audit`: read the audit log; `lockwatch audit verify`: check its chain."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from lockwatch.cli.table import printable
from lockwatch.cli.where import (
    AUDIT_KEY_OPTION,
    AUDIT_LOG_OPTION,
    CONFIG_OPTION,
    warn_if_key_beside_log,
)

EXIT_OK = 0
EXIT_TAMPERED = 1
EXIT_CANNOT = 2


def _paths(
    given: Path | None, given_key: Path | None, config_path: str | None
) -> tuple[Path, Path]:
    """The audit log and its key in force: the flags, else the config, else defaults."""
    from lockwatch.actions.audit import key_path, log_path
    from lockwatch.config import ConfigError
    from lockwatch.sources.registry import load_config as load

    if given is not None and given_key is not None:
        return given, given_key
    try:
        config = load(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    return log_path(given, config.audit_log), key_path(given_key, config.audit_key)


def _need(path: Path, key_file: Path) -> None:
    from lockwatch.actions.audit import head_path

    if not path.exists():
        if _head_names_records(path):
            # Its head says records were written: a log that vanished was removed.
            click.echo(
                f"lockwatch: {path}: TAMPERED: the log is gone but its head"
                f" {head_path(path).name} says records were written",
                err=True,
            )
            sys.exit(1)
        since = _keyed_since(path, key_file)
        if since is not None:
            # Log and head both gone: the key's directory, which the log's writers
            # need not be able to write, still remembers the log.
            click.echo(
                f"lockwatch: {path}: TAMPERED: the log and its head are gone, but"
                f" {key_file.name}.logs beside the key says a log here was keyed from record"
                f" {since} on: it was removed (or moved aside, head and all)",
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
prev_hash, hash, key_id and mac (an HMAC under the key --audit-key names,
kept apart from the log). Events: action_intent (written before acting),
then lock_broken, lock_stolen, lock_released, backend_terminated,
backend_cancelled, action_refused or action_failed.

\b
Examples:
  lockwatch audit                       # the log, newest last
  lockwatch audit --json | jq '.[] | select(.event=="lock_broken")'
  lockwatch audit verify || page-security
  journalctl -t lockwatch-audit -o cat > anchors.txt
  lockwatch audit verify --anchors anchors.txt   # what --audit-syslog sent
""",
)
@AUDIT_LOG_OPTION
@AUDIT_KEY_OPTION
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True, help="Every record, as a JSON array.")
@click.pass_context
def audit(
    ctx: click.Context,
    audit_log: Path | None,
    audit_key: Path | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Print the audit log: every action taken, refused or failed."""
    ctx.obj = (audit_log, audit_key, config_path)
    if ctx.invoked_subcommand is not None:
        return
    from lockwatch.actions.audit import read_records

    path, key_file = _paths(audit_log, audit_key, config_path)
    _need(path, key_file)
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
@AUDIT_KEY_OPTION
@CONFIG_OPTION
@click.option(
    "--anchors",
    "anchors_file",
    type=click.Path(allow_dash=True),
    default=None,
    metavar="FILE",
    help="Lines --audit-syslog sent (e.g. `journalctl -t lockwatch-audit -o cat > FILE`):"
    " every record they name must be in the log, unchanged.",
)
@click.pass_context
def verify(
    ctx: click.Context,
    audit_log: Path | None,
    audit_key: Path | None,
    config_path: str | None,
    anchors_file: str | None,
) -> None:
    """Check every record's hash and MAC, the hash chain, the sequence, and the
    head: exit 1 naming the first record that was edited, removed or reordered;
    2 when it cannot tell (no such log, or keyed records and not their key).

    \b
    A line cut short by a crash (lockwatch killed, the disk full) is not an
    edit: it is reported as torn, and the log still verifies (exit 0).
    Logs written before lockwatch keyed them verify as unkeyed: their chain
    shows edits by anyone who does not recompute hashes, nothing more.
    """
    from lockwatch.actions.audit import AuditKey, AuditKeyError
    from lockwatch.actions.audit import verify as check
    from lockwatch.actions.audit_key import UnsafeKey

    parent_log, parent_key, parent_config = ctx.obj or (None, None, None)
    path, key_file = _paths(
        audit_log or parent_log, audit_key or parent_key, config_path or parent_config
    )
    _need(path, key_file)
    warn_if_key_beside_log(key_file, path)
    key = None
    try:
        key = AuditKey.load(key_file)
    except AuditKeyError as exc:
        # Named, so it must be there; others could read it: no verdict under it.
        if audit_key or parent_key or isinstance(exc, UnsafeKey):
            click.echo(f"lockwatch: {printable(str(exc))}", err=True)
            sys.exit(EXIT_CANNOT)
    anchors = _anchor_lines(anchors_file) if anchors_file is not None else None
    try:
        result = check(path, key=key, key_file=key_file, anchors=anchors)
    except OSError as exc:
        click.echo(f"lockwatch: cannot read {path}: {exc.strerror}", err=True)
        sys.exit(EXIT_CANNOT)
    shown = printable(str(path))
    if result.status == "needs_key":
        click.echo(
            f"lockwatch: {shown}: cannot verify: {printable(result.problem or '')}"
            f" ({result.records} records verified before it)",
            err=True,
        )
        sys.exit(EXIT_CANNOT)
    if not result.ok:
        where = []
        if result.seq is not None:
            where.append(f"record {result.seq}")
        if result.line is not None:
            where.append(f"line {result.line}")
        place = f" at {', '.join(where)}" if where else ""
        click.echo(
            f"lockwatch: {shown}: TAMPERED{place}: {printable(result.problem or '')}"
            f" ({result.records} records verified before it)",
            err=True,
        )
        sys.exit(EXIT_TAMPERED)
    click.echo(f"{shown}: {result.records} records, chain intact{_keying(result, key_file)}")
    if result.anchored:
        click.echo(f"  {result.anchored} records match their syslog anchors")
    for note in result.notes:
        click.echo(f"  note: {printable(note)}")


# journalctl's lines for a million records fit many times over; /dev/zero does not.
MAX_ANCHORS_BYTES = 512 * 1024 * 1024


def _anchor_lines(name: str) -> list[str]:
    """The lines of the anchors file (`-`: standard input), read bounded from a
    regular file or the pipe it was given as."""
    from lockwatch.trusted import read_file

    try:
        if name == "-":
            data = sys.stdin.buffer.read(MAX_ANCHORS_BYTES + 1)
            if len(data) > MAX_ANCHORS_BYTES:
                raise OSError(0, f"more than the {MAX_ANCHORS_BYTES // 2**20} MiB allowed")
        else:
            data = read_file(name, MAX_ANCHORS_BYTES, None)
    except OSError as exc:
        click.echo(f"lockwatch: --anchors {printable(name)}: {exc.strerror or exc}", err=True)
        sys.exit(EXIT_CANNOT)
    return data.decode("utf-8", "replace").splitlines()


def _keying(result: Any, key_file: Path) -> str:
    if not result.records:
        return ""
    if not result.unkeyed:
        return f", keyed (key {result.key_id}, {printable(str(key_file))})"
    unkeyed = (
        " UNKEYED: written before lockwatch keyed its audit logs; their chain shows edits"
        " by anyone who does not recompute hashes, not by someone who can rewrite the log"
    )
    if not result.keyed:
        return f";{unkeyed}"
    return (
        f"; records 1-{result.unkeyed} are{unkeyed}; the {result.keyed} after them are keyed"
        f" (key {result.key_id})"
    )


def _keyed_since(path: Path, key_file: Path) -> int | None:
    from lockwatch.actions.audit import AuditKey, AuditKeyError
    from lockwatch.actions.audit_key import keyed_since

    try:
        return keyed_since(AuditKey.load(key_file), path)
    except AuditKeyError:
        return None


def _head_names_records(log: Path) -> bool:
    """Whether the head file beside a log says records were written to it (a head
    that is no head does: the log was there, and something is wrong)."""
    from lockwatch.actions.audit_format import read_head

    head = read_head(log)
    if head is None:
        return False
    seq = head.get("seq")
    return not (isinstance(seq, int) and seq == 0)
