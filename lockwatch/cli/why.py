"""`lockwatch why WHAT`: from an error message, a path or a lock id to who holds
the lock, for how long, the verdict and the safe next step.

What a text names is each source's to recognise (`Source.clues`); what the
locks are is what `ls` would say of them (the same collection, the same
verdicts, the same records): `why` only chooses where to look and says it in
a few lines.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from lockwatch.cli.ending import finish
from lockwatch.cli.table import printable
from lockwatch.cli.where import CONFIG_OPTION
from lockwatch.cli.why_args import TextAfterOptions
from lockwatch.cli.why_look import Finding, Look
from lockwatch.model.clues import Clue, ClueKind, distinct
from lockwatch.model.holder import pid_here
from lockwatch.model.humanize import duration
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.text import SHOWN, cut
from lockwatch.model.verdict import State

if TYPE_CHECKING:
    from lockwatch.config import Config
    from lockwatch.model.activity import ProcessActivity
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict

WHY_SCHEMA = "lockwatch.why/1"
# A date and time in a pasted text: `why` then asks the history about that moment.
_STAMP = lazy_compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}")
EXIT_FOUND = 0
EXIT_NOTHING = 1
EXIT_USAGE = 2
# A tool's message, pasted or piped, is a few lines (Terraform's "Lock Info" block
# is under 1 KiB): 64 KiB holds it with what a run printed before it.
MAX_STDIN_BYTES = 64 * 1024

LOOKS_FOR = (
    "paths of lock files (apt/dpkg, git, Terraform's Lock Info, flock and lockfile-progs"
    " command lines, SQLite database files), lock ids as `ls --json` prints them, and"
    " PostgreSQL and MySQL lock errors (timeouts, deadlocks with their pids, relations,"
    " GET_LOCK names), and client-go's leader-election lines naming a Lease or its holder"
)


def _source_options(func: Any) -> Any:
    """Every source's options as `ls` takes them (--pg, --kernel, --mysql, ...),
    but not its PATH argument: WHAT is this command's only argument."""
    from lockwatch.sources.registry import options

    def probe() -> None: ...

    decorated: Any = probe
    for decorator in reversed([*options(), CONFIG_OPTION]):
        decorated = decorator(decorated)
    params = [p for p in decorated.__click_params__ if not isinstance(p, click.Argument)]
    func.__click_params__ = [*getattr(func, "__click_params__", []), *params]
    return func


@click.command(
    "why",
    cls=TextAfterOptions,
    short_help="Why is it locked? Paste the error, a path or a lock id.",
    epilog="""\b
WHAT is any of:
  an error message      lockwatch why "E: Could not get lock /var/lib/dpkg/lock-frontend.
                          It is held by process 1234 (apt-get)"
                        lockwatch why "fatal: Unable to create '/srv/app/.git/index.lock':
                          File exists."
  Terraform's block     terraform plan 2>&1 | lockwatch why -
  a path                lockwatch why app.db        (a lock file, or a file locks are on)
  a lock id             lockwatch why 'file:/srv/locks/deploy.lock'
  a server's error      lockwatch why --pg postgresql://monitor@db/app \\
                          "ERROR:  deadlock detected DETAIL:  Process 8525 waits for ..."
                        lockwatch why --mysql mysql://monitor@db:3306/app \\
                          "ERROR 1205 (HY000): Lock wait timeout exceeded; ..."
                        lockwatch why --mysql mysql://monitor@db/app "SELECT GET_LOCK('sync', 5)"
  -                     read WHAT from standard input (a multi-line message)
                          mariadb app < job.sql 2>&1 | lockwatch why --mysql DSN -

\b
WHAT is the rest of the line after the options, whatever it starts with: a
pasted error in the mariadb client's box of dashes is text, not an option
(lockwatch why "$(cat error.txt)"). Options go before it.

\b
It recognises the messages of apt and dpkg, git, SQLite (with the database's
path), Terraform (Lock Info: ID and Path), flock(1) and lockfile-progs command
lines, PostgreSQL (lock timeout, NOWAIT, deadlock with its pids, relations;
a statement timeout is said not to be a lock) and MySQL/MariaDB (1205, 1213,
3572, GET_LOCK names, the failed statement's tables and row). Server errors
are looked up on the servers --pg and --mysql name (else LOCKWATCH_PG, the
config, ...). The states and reasons are `lockwatch ls`'s. Each lock says how
sure it is the one, and what matched: certain (the text names it: its path,
id, session, lock name, or table and row), likely (its table, not its row),
possible (it blocks others now; the text names nothing of it).

\b
Exit status:
  0  found the lock (or the locks on the file)
  1  nothing matched: it says what it looked at
  2  usage: no WHAT, unreadable input, a bad option or config
""",
)
@_source_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (lockwatch.why/1).")
@click.option(
    "--at",
    metavar="T",
    default=None,
    help="Answer from the recorded history at T (RFC 3339, HH:MM[:SS] today, -15m);"
    " without it, a past timestamp in the text is used where the history has a wait then.",
)
@click.option(
    "--history",
    "history_path",
    metavar="PATH|DSN",
    default=None,
    help="The history --at reads [default: history.sqlite3 in the user state directory].",
)
@click.argument("what", nargs=-1, metavar="WHAT")
def why(**values: Any) -> None:
    """Say who holds the lock WHAT names, for how long, whether it is stale,
    who waits, and the safe next step: wait, the exact `lockwatch break`, or
    the tool's own repair."""
    text = _read(values.pop("what"))
    as_json: bool = values.pop("as_json")
    config = _config(values.get("config_path"))
    clues = recognise(text)
    at_text, history_path = values.pop("at"), values.pop("history_path")
    if at_text is not None or _has_time(text):
        # The history's readers load only when the text or --at ask for a past time.
        from lockwatch.cli.why_at import answer

        answer(text, clues, at_text, history_path, as_json=as_json)
    from lockwatch.clock import SystemClock

    now = SystemClock().now()
    host = os.uname().nodename
    look = Look(values, config, os.environ, now, host)
    look.run(clues)
    if as_json:
        _print_json(text, clues, look)
    else:
        _print_text(clues, look)
    finish(EXIT_FOUND if look.findings else EXIT_NOTHING)


def _has_time(text: str) -> bool:
    """Whether the text holds a date and time (a server log line's stamp)."""
    return _STAMP.search(text) is not None


def _read(words: Sequence[str]) -> str:
    text = _read_stdin() if list(words) == ["-"] else " ".join(words)
    if not text.strip():
        raise click.UsageError(
            "say what is locked: an error message, a path or a lock id"
            " (e.g. lockwatch why app.db; see --help)"
        )
    return text


def _read_stdin() -> str:
    """Standard input, its first MAX_STDIN_BYTES at most: a tool's message is a
    few lines, and `</dev/zero` must not take the machine's memory. What is past
    the cap is not read, and one line says so."""
    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    cut = len(data) > MAX_STDIN_BYTES
    if cut:
        data = data[:MAX_STDIN_BYTES]
        print(
            f"lockwatch: standard input is over {MAX_STDIN_BYTES >> 10} KiB:"
            f" only its first {MAX_STDIN_BYTES >> 10} KiB was looked at",
            file=sys.stderr,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A character the cap split in two is not a reason to refuse the rest.
        if cut and exc.reason == "unexpected end of data":
            return data[: exc.start].decode("utf-8")
        raise click.UsageError("standard input is not UTF-8 text; nothing was looked at") from None


def _config(path: str | None) -> Config:
    from lockwatch.config import ConfigError
    from lockwatch.sources.registry import load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc


def recognise(text: str) -> list[Clue]:
    """What `text` names: a lock id typed alone (the registry knows ids), else
    what each source recognises in it."""
    from lockwatch.sources.registry import SOURCES, for_id, id_prefix

    word = text.strip()
    if not any(ch.isspace() for ch in word) and id_prefix(word) is not None:
        source = for_id(word)
        if source is not None and not os.path.lexists(word):
            return [Clue(ClueKind.ID, word, source.name)]
    return distinct(clue for source in SOURCES for clue in source.clues(text))


def _kernel_word(lock: Lock, verdict: Verdict) -> str:
    return f"{lock.format} by {_who(lock, verdict)}"


def _who(lock: Lock, verdict: Verdict) -> str:
    """The holder in a few words: `apt-get (pid 1234)`."""
    facts = lock.facts
    said = None if facts is None else facts.holder_text(lock)
    if said:
        return said
    process = verdict.process
    pid = pid_here(lock, verdict)
    if process is not None and process.cmdline:
        return f"{os.path.basename(process.cmdline[0])} (pid {process.pid})"
    if pid is not None:
        return f"pid {pid}"
    return lock.holder.actor or "nobody known"


def holder_line(lock: Lock, verdict: Verdict) -> str:
    facts = lock.facts
    said = None if facts is None else facts.holder_text(lock)
    holder = lock.holder
    process = verdict.process
    parts = []
    if said:
        parts.append(said)
    elif holder.pid is not None:
        command = " ".join(process.cmdline) if process is not None and process.cmdline else ""
        if len(command) > 60:
            command = command[:59] + "…"
        parts.append(f"pid {pid_here(lock, verdict)}" + (f" ({command})" if command else ""))
    if process is not None and process.user:
        parts.append(f"user {process.user}")
    if holder.host:
        parts.append(f"host {holder.host}")
    if holder.actor and not said:
        parts.append(holder.actor)
    if verdict.alive is False:
        parts.append("not running")
    return ", ".join(parts) or "nobody known"


def age_line(lock: Lock, verdict: Verdict, now: datetime) -> str | None:
    if verdict.age_seconds is not None:
        return duration(verdict.age_seconds)
    if lock.facts is not None:
        return lock.facts.age_bound(lock, now)
    return None


def waits_line(lock: Lock, waiters: Sequence[Any] = ()) -> str | None:
    facts = lock.facts
    if facts is not None:
        waits = facts.waits()
        count = facts.waiter_count()
        if waits is not None:
            return "it waits for " + ", ".join(str(node) for node in waits[1])
        if waiters:
            # Who waits, then on whom: "waiting on its holder: 42" read as the lock's own wait.
            verb = "waits" if len(waiters) == 1 else "wait"
            return ", ".join(str(node) for node in waiters) + f" {verb} on its holder"
        if count:
            return f"{count} waiting on it"
        return facts.waits_said()
    return None


def next_step(finding: Finding, now: datetime) -> dict[str, Any]:
    """What to do now, as `kind`, words, and the exact command where there is one.
    It says what the state line does not: the reasons are said there, the
    tool's advice on its own line (and in JSON beside this)."""
    lock, verdict = finding.lock, finding.verdict
    state = verdict.state
    if state is State.STALE:
        # Never "wait" on a holder the verdict calls stale: the break it takes.
        first = verdict.reasons[0] if verdict.reasons else None
        reason = f"{first.code}: {first.message}" if first else "stale"
        if len(reason) > 100:
            reason = reason[:99] + "…"
        command = f"lockwatch break {shlex.quote(lock.id)} --reason {shlex.quote(reason)}"
        if "inferred" in verdict.codes:
            # Stale by inference only: a break takes its name typed, the CLI --force.
            command += " --force"
        return {"action": "break", "text": f"stale: {command}", "command": command}
    if state is State.ACTIVE:
        from lockwatch.model.activity import holder_doing

        process = _process_activity(lock, verdict, now)
        doing = holder_doing(lock, verdict, now, process)
        text = _wait_text(_who(lock, verdict), doing, verdict, process)
        return {"action": "wait", "text": text, "command": None}
    if state is State.WAITING:
        return {"action": "wait", "text": _waiter_text(lock), "command": None}
    if state is State.FREE:
        return {"action": "retry", "text": "retry: nobody holds it now", "command": None}
    if state is State.INVALID:
        text = "fix: it cannot be read as its format: repair or remove it as its tool says"
        return {"action": "fix", "text": text, "command": None}
    text = "check by hand: nobody can tell its state from here (the readings are above)"
    return {"action": "check", "text": text, "command": None}


def _process_activity(lock: Lock, verdict: Verdict, now: datetime) -> ProcessActivity | None:
    """Its holder's process as /proc shows it now, where the holder is a process
    of this host the verdict found alive and its source has no words of its own."""
    facts = lock.facts
    if facts is not None and facts.activity(lock, verdict, now) is not None:
        return None
    process = verdict.process
    if process is None or not process.alive:
        return None
    from lockwatch.sources.processes import read_activity

    return read_activity(process.pid)


# Reason codes of a holder idle past its source's limit, not stale only because
# its client process is alive: nobody is at work on it, its owner is.
_IDLE_PAST_LIMIT = ("idle_in_transaction", "idle_holder")


def _wait_text(who: str, doing: str, verdict: Verdict, process: ProcessActivity | None) -> str:
    """`wait:` for a holder at work; for one that waits for someone, who that is."""
    if process is not None and process.reads_terminal and process.foreground:
        return (
            f"ask who is at its terminal: {who} is {doing}; the lock stays held until"
            " they answer it or end it"
        )
    if any(code in verdict.codes for code in _IDLE_PAST_LIMIT):
        return f"ask who runs it: {who} is {doing}"
    return f"wait: {who} is {doing}"


def _waiter_text(lock: Lock) -> str:
    facts = lock.facts
    waits = None if facts is None else facts.waits()
    if waits is not None and waits[1]:
        on = ", ".join(str(node) for node in waits[1])
        return f"wait: it waits itself, on {on}: what to do is its blocker's to say"
    return "wait: it waits itself, for its blocker"


def _print_text(clues: Sequence[Clue], look: Look) -> None:
    def say(line: str) -> None:
        click.echo(printable(line))

    for finding in look.findings:
        lock, verdict = finding.lock, finding.verdict
        say(f"{finding.match.sure.value}: {lock.id}")
        say(f"  match:  {finding.match.matched}")
        reasons = "; ".join(f"{r.code}: {r.message}" for r in verdict.reasons[:3])
        say(f"  state:  {verdict.state.value}" + (f" ({reasons})" if reasons else ""))
        say(f"  holder: {holder_line(lock, verdict)}")
        age = age_line(lock, verdict, look.now)
        if age is not None:
            say(f"  held:   {age}")
        waits = waits_line(lock, finding.waiters)
        if waits is not None:
            say(f"  waits:  {waits}")
        message = _message_said(finding, clues)
        if message is not None:
            say(f"  said:   {message}")
        say(f"  next:   {next_step(finding, look.now)['text']}")
    for note in look.notes:
        say(note)
    advice = dict.fromkeys(
        (clue.tool, clue.advice)
        for clue in clues
        if clue.advice and clue.tool and clue.kind is not ClueKind.NOT_A_LOCK
    )
    for _, words in advice:
        say(f"advice: {words}")
    if not look.findings:
        if not clues:
            click.echo(
                printable(f"lockwatch: nothing recognisable in the text; looked for {LOOKS_FOR}"),
                err=True,
            )
        else:
            if look.unseen:
                places = "; ".join(cut(place, 4 * SHOWN) for place in look.unseen)
                said = f"lockwatch: cannot tell whether it is locked: {places}"
            elif look.looked_at:
                # A place is the text's own (64 KiB of stdin can be one "path").
                places = "; ".join(cut(place) for place in look.looked_at)
                said = f"lockwatch: no lock found; looked at: {places}"
            else:
                said = "lockwatch: the text names no file, lock id or server lock to look up"
            click.echo(printable(said), err=True)
    for warning in look.warnings:
        click.echo(f"lockwatch: {printable(warning)}", err=True)


def _message_said(finding: Finding, clues: Sequence[Clue]) -> str | None:
    """What the pasted message said of the holder, when it is not who holds it now."""
    for clue in clues:
        if (
            clue.kind is ClueKind.PID
            and clue.source == finding.clue.source
            and finding.lock.holder.pid != int(clue.value)
        ):
            who = f" ({clue.command})" if clue.command else ""
            return f"the message named pid {clue.value}{who}; that is not the holder now"
    return None


def _print_json(text: str, clues: Sequence[Clue], look: Look) -> None:
    import orjson

    from lockwatch.model.report import lock_record, texts
    from lockwatch.model.report import text as json_text

    locks = []
    for finding in look.findings:
        record = dict(lock_record(finding.lock, finding.verdict, look.now))
        record["next_step"] = {**next_step(finding, look.now), "advice": finding.clue.advice}
        record["likely"] = finding.likely
        record["sure"] = finding.match.sure.value
        record["matched"] = json_text(finding.match.matched)
        record["waiting_on_holder"] = list(finding.waiters)
        record["clue"] = {"kind": finding.clue.kind.value, "value": finding.clue.value}
        locks.append(record)
    document = {
        "schema": WHY_SCHEMA,
        "generated_at": look.now,
        "host": look.host,
        "input": json_text(text),
        "clues": [texts(clue.as_json()) for clue in clues],
        "locks": locks,
        "notes": [json_text(note) for note in look.notes],
        "looked_at": [json_text(place) for place in look.looked_at],
        "warnings": [json_text(warning) for warning in look.warnings],
    }
    click.echo(orjson.dumps(document, option=orjson.OPT_UTC_Z).decode())
    if not look.findings and not clues:
        click.echo(f"lockwatch: nothing recognisable; looked for {LOOKS_FOR}", err=True)
