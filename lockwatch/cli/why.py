"""`lockwatch why WHAT`: from an error message, a path or a lock id to who holds
the lock, for how long, the verdict and the safe next step.

What a text names is each source's to recognise (`Source.clues`); what the
locks are is what `ls` would say of them (the same collection, the same
verdicts, the same records): `why` only chooses where to look and says it in
a few lines.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from lockwatch.cli.ending import finish
from lockwatch.cli.table import printable
from lockwatch.cli.where import CONFIG_OPTION
from lockwatch.model.clues import Clue, ClueKind, distinct
from lockwatch.model.humanize import duration
from lockwatch.model.verdict import State

if TYPE_CHECKING:
    from lockwatch.config import Config
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict
    from lockwatch.sources.contract import Collected, Source

WHY_SCHEMA = "lockwatch.why/1"
EXIT_FOUND = 0
EXIT_NOTHING = 1
EXIT_USAGE = 2

# Locks said per source looked at: the rest is `ls`'s to list.
MOST = 8

LOOKS_FOR = (
    "paths of lock files (apt/dpkg, git, Terraform's Lock Info, flock and lockfile-progs"
    " command lines, SQLite database files), lock ids as `ls --json` prints them, and"
    " PostgreSQL and MySQL lock errors (timeouts, deadlocks with their pids, relations,"
    " GET_LOCK names)"
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

\b
It recognises the messages of apt and dpkg, git, SQLite (with the database's
path), Terraform (Lock Info: ID and Path), flock(1) and lockfile-progs command
lines, PostgreSQL (lock timeout, NOWAIT, deadlock with its pids, relations;
a statement timeout is said not to be a lock) and MySQL/MariaDB (1205, 1213,
3572, GET_LOCK names). Server errors are looked up on the servers --pg and
--mysql name (else LOCKWATCH_PG, the config, ...). The states and reasons are
`lockwatch ls`'s; a server's lock that a timeout names no one for is said as
the likely blocker (the root of the server's blocking trees now).

\b
Exit status:
  0  found the lock (or the locks on the file)
  1  nothing matched: it says what it looked at
  2  usage: no WHAT, unreadable input, a bad option or config
""",
)
@_source_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (lockwatch.why/1).")
@click.argument("what", nargs=-1, metavar="WHAT")
def why(**values: Any) -> None:
    """Say who holds the lock WHAT names, for how long, whether it is stale,
    who waits, and the safe next step: wait, the exact `lockwatch break`, or
    the tool's own repair."""
    text = _read(values.pop("what"))
    as_json: bool = values.pop("as_json")
    config = _config(values.get("config_path"))
    clues = recognise(text)
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


def _read(words: Sequence[str]) -> str:
    if list(words) == ["-"]:
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise click.UsageError(
                "standard input is not UTF-8 text; nothing was looked at"
            ) from None
    else:
        text = " ".join(words)
    if not text.strip():
        raise click.UsageError(
            "say what is locked: an error message, a path or a lock id"
            " (e.g. lockwatch why app.db; see --help)"
        )
    return text


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


# --- looking --------------------------------------------------------------------


@dataclass
class Finding:
    lock: Lock
    verdict: Verdict
    clue: Clue
    # A server's blocker found only as a root of its blocking trees now: the
    # likely culprit, not certainly the one the message was about.
    likely: bool = False
    # The sessions waiting on its holder (a server's), as its blocking tree names them.
    waiters: tuple[Any, ...] = ()


@dataclass
class Look:
    values: Mapping[str, Any]
    config: Config
    environ: Mapping[str, str]
    now: datetime
    host: str
    findings: list[Finding] = field(default_factory=list)
    looked_at: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was found that is no lock
    warnings: list[str] = field(default_factory=list)

    def run(self, clues: Sequence[Clue]) -> None:
        for clue in clues:
            if clue.kind is ClueKind.PATH:
                self._path(clue)
            elif clue.kind is ClueKind.ID:
                self._id(clue)
        servers: dict[str, list[Clue]] = {}
        for clue in clues:
            if clue.kind in (ClueKind.PID, ClueKind.NAME, ClueKind.HINT) and _looks_up(clue):
                servers.setdefault(clue.source, []).append(clue)
        for name, theirs in servers.items():
            self._server(name, theirs)
        for clue in clues:
            if clue.kind is ClueKind.NOT_A_LOCK:
                self.notes.append(f"not a lock: {clue.advice}")

    # A path: the lock file there (the file source's listing of it), or the
    # kernel's locks on a file that is none.
    def _path(self, clue: Clue) -> None:
        path = os.path.abspath(os.path.expanduser(clue.value))
        if not os.path.lexists(path):
            self.looked_at.append(f"{path}: no such file now (released, removed, or elsewhere)")
            return
        options = dict(clue.options)
        wanted_sources = self._sources(clue.source, options)
        collected = self._collect(wanted_sources, {**options, "paths": (path,)}, (path,))
        places = {path, os.path.realpath(path)}
        is_dir = os.path.isdir(path) and not os.path.islink(path)
        own: list[tuple[Lock, Verdict]] = []
        others: list[tuple[Lock, Verdict]] = []
        for source, part in collected:
            for lock, verdict in part.assessed:
                if not _at(lock.path, places, is_dir):
                    continue
                (own if source.name == clue.source else others).append((lock, verdict))
        looked = f"{path} and the kernel's locks on it" if len(wanted_sources) > 1 else path
        self.looked_at.append(looked)
        if clue.lock_file:
            others = []  # a lock file's kernel lock is in its own record
        elif others:
            # A file locks are taken on (a database): the kernel's locks on it are
            # its story, not the file judged as if it were a lock file.
            self.notes.append(
                f"{path} is not a lock file lockwatch knows; the kernel's locks on it are above"
            )
            own = []
        elif own and all(verdict.state is State.INVALID for _, verdict in own):
            said = "; ".join(r.message for _, v in own for r in v.reasons[:1])
            self.notes.append(
                f"{path} is not a lock file lockwatch knows ({said}); no kernel lock on it now"
            )
            own = []
        for lock, verdict in [*own, *others]:
            self.findings.append(Finding(lock, verdict, clue))

    def _id(self, clue: Clue) -> None:
        from lockwatch.actions.targets import find
        from lockwatch.sources.contract import LookupFailed, SourceError, Wanted

        wanted = Wanted((), self.values, self.config, self.environ)
        try:
            found = find(clue.value, wanted, self.host)
        except SourceError as exc:
            raise click.UsageError(str(exc)) from exc
        except LookupFailed as exc:
            self.warnings.append(str(exc))
            self.looked_at.append(f"{clue.value}: its source could not be asked")
            return
        self.looked_at.append(clue.value)
        if isinstance(found, str):
            self.notes.append(found)
            return
        lock, verdict, _ = found
        self.findings.append(Finding(lock, verdict, clue))

    def _server(self, name: str, clues: Sequence[Clue]) -> None:
        """A server's locks of the sessions and names `clues` give, and their
        blockers; with only a hint ("lock wait timeout"), its blocking trees' roots."""
        options = _merged(clue.options for clue in clues)
        chosen = self._sources(name, options)[:1]
        if not chosen:
            return
        source = chosen[0]
        parts = self._collect(chosen, options, ())
        if not parts:
            flag = _first_flag(source)
            self.looked_at.append(
                f"{source.name}: no server to ask (name one with {flag} DSN)"
                if flag
                else f"{source.name}: not configured"
            )
            return
        ((_, part),) = parts
        for warning in part.warnings:
            self.warnings.append(warning)
        pids = {int(clue.value) for clue in clues if clue.kind is ClueKind.PID}
        names = [clue.value for clue in clues if clue.kind is ClueKind.NAME]
        assessed = part.assessed
        servers = ", ".join(status.name for status in part.statuses) or source.name
        asked = []
        if pids:
            asked.append("sessions " + ", ".join(str(pid) for pid in sorted(pids)))
        if names:
            asked.append("locks on " + ", ".join(names))
        graph = Graph(assessed)
        matched = {
            node
            for lock, _ in assessed
            if _has_pid(lock, pids) or any(_named(lock.name, n) for n in names)
            for node in graph.nodes_of(lock)
        }
        likely = False
        if matched:
            # Those of them others wait on, and whoever they wait on themselves.
            culprits = {node for node in matched if graph.waiters.get(node)}
            for node in matched:
                culprits.update(graph.blockers.get(node, ()))
            picked = culprits or matched
        else:
            picked = graph.roots()
            likely = bool(picked)
            asked.append("the roots of its blocking trees now")
        pairs = [pair for pair in assessed if graph.holder_of(pair[0]) in picked]
        self.looked_at.append(f"{source.name} {servers}: " + "; ".join(asked))
        clue = next((c for c in clues if c.kind is not ClueKind.HINT), clues[0])
        shown = _few(pairs, names)
        for lock, verdict in shown[:MOST]:
            waiting = sorted(graph.waiters.get(graph.holder_of(lock), ()), key=str)
            self.findings.append(Finding(lock, verdict, clue, likely, tuple(waiting)))
        if len(shown) > MOST:
            self.notes.append(
                f"{len(shown) - MOST} more on {servers}: `lockwatch ls {_first_flag(source)}"
                " ...` lists them"
            )

    def _sources(self, name: str, options: Mapping[str, Any]) -> list[Source]:
        """The source `name`, then those `options` ask for (the kernel's word on a file)."""
        from lockwatch.sources.registry import SOURCES

        first = [source for source in SOURCES if source.name == name]
        rest = [s for s in SOURCES if s.name != name and options and s.asked(options)]
        return first + rest

    def _collect(
        self, sources: Sequence[Source], options: Mapping[str, Any], paths: tuple[str, ...]
    ) -> list[tuple[Source, Collected]]:
        from lockwatch.sources.contract import ListingRequest, SourceError, Wanted

        values = {**self.values, **options}
        wanted = Wanted(paths, values, self.config, self.environ, others_asked=not paths)
        request = ListingRequest(self.now, self.host, False, 1)
        out = []
        for source in sources:
            try:
                selected = source.select(wanted)
            except SourceError as exc:
                raise click.UsageError(str(exc)) from exc
            if selected is not None:
                out.append((source, selected.collect(request)))
        return out


class Graph:
    """Who waits on whom among one server's locks, as their facts say it."""

    def __init__(self, assessed: Sequence[tuple[Lock, Verdict]]) -> None:
        self.blockers: dict[Any, set[Any]] = {}
        self.waiters: dict[Any, set[Any]] = {}
        for lock, _ in assessed:
            waits = None if lock.facts is None else lock.facts.waits()
            if waits is None:
                continue
            waiter, blockers = waits
            self.blockers.setdefault(waiter, set()).update(blockers)
            for blocker in blockers:
                self.waiters.setdefault(blocker, set()).add(waiter)

    @staticmethod
    def holder_of(lock: Lock) -> Any:
        return None if lock.facts is None else lock.facts.holds_as()

    def nodes_of(self, lock: Lock) -> list[Any]:
        """The sessions `lock` is of: its holder, or its waiter."""
        if lock.facts is None:
            return []
        waits = lock.facts.waits()
        nodes = [lock.facts.holds_as(), None if waits is None else waits[0]]
        return [node for node in nodes if node is not None]

    def roots(self) -> set[Any]:
        """Blockers that wait on nobody: ending one frees its whole chain."""
        return {node for node in self.waiters if not self.blockers.get(node)}


def _looks_up(clue: Clue) -> bool:
    """Whether the clue's source has locks to look up by it (a server's), rather
    than a message a file's path already answers (apt's pid)."""
    from lockwatch.sources.registry import by_name

    source = by_name(clue.source)
    return source is not None and source.sees_waits and source.wait_metrics is not None


def _merged(options: Iterable[tuple[tuple[str, Any], ...]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for pairs in options:
        for key, value in pairs:
            before = merged.get(key)
            if isinstance(value, tuple) and isinstance(before, tuple):
                merged[key] = tuple(dict.fromkeys((*before, *value)))
            else:
                merged[key] = value
    return merged


def _first_flag(source: Source) -> str | None:
    """The source's first option's flag (--pg), from its click options."""

    def probe() -> None: ...

    decorated: Any = probe
    for decorator in source.options():
        decorated = decorator(decorated)
    for param in getattr(decorated, "__click_params__", []):
        if isinstance(param, click.Option) and param.opts:
            return str(param.opts[0])
    return None


def _at(path: str | None, places: set[str], is_dir: bool) -> bool:
    if path is None:
        return False
    if path in places:
        return True
    return is_dir and any(path.startswith(place.rstrip("/") + "/") for place in places)


def _has_pid(lock: Lock, pids: set[int]) -> bool:
    if not pids:
        return False
    if lock.holder.pid in pids:
        return True
    facts = lock.facts
    return facts is not None and any(facts.matches_pid(pid) for pid in pids)


def _named(name: str, wanted: str) -> bool:
    """Whether lock name `name` is of `wanted` (a relation `jobs` names
    `public.jobs` and `public.jobs (0,1)`, not `jobs_archive`)."""
    if name == wanted:
        return True
    return re.search(rf"(?:^|[.\s]){re.escape(wanted)}(?:$|[\s(])", name) is not None


def _few(pairs: list[tuple[Lock, Verdict]], names: Sequence[str]) -> list[tuple[Lock, Verdict]]:
    """Per session, the locks that tell the story: those others wait on, those it
    waits for, those named; else its first."""
    by_session: dict[Any, list[tuple[Lock, Verdict]]] = {}
    for lock, verdict in pairs:
        key = lock.facts.session_key() if lock.facts is not None else None
        by_session.setdefault(key if key is not None else lock.id, []).append((lock, verdict))
    out = []
    for group in by_session.values():
        blocking = [
            (lock, verdict)
            for lock, verdict in group
            if lock.facts is not None
            and (lock.facts.waiter_count() > 0 or lock.facts.waits() is not None)
        ]
        named = [
            (lock, verdict) for lock, verdict in group if any(_named(lock.name, n) for n in names)
        ]
        out.extend(blocking or named or group[:1])
    return out


# --- saying it ------------------------------------------------------------------


def _kernel_word(lock: Lock, verdict: Verdict) -> str:
    return f"{lock.format} by {_who(lock, verdict)}"


def _who(lock: Lock, verdict: Verdict) -> str:
    """The holder in a few words: `apt-get (pid 1234)`."""
    facts = lock.facts
    said = None if facts is None else facts.holder_text(lock)
    if said:
        return said
    process = verdict.process
    pid = lock.holder.pid
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
        parts.append(f"pid {holder.pid}" + (f" ({command})" if command else ""))
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
            return "waiting on its holder: " + ", ".join(str(node) for node in waiters)
        if count:
            return f"{count} waiting on it"
        return None
    evidence = lock.evidence
    if evidence is not None and evidence.waiters:
        return f"{evidence.waiters} waiting on it (kernel)"
    return None


def next_step(finding: Finding) -> dict[str, Any]:
    """What to do now, as `kind`, words, and the exact command where there is one."""
    lock, verdict, clue = finding.lock, finding.verdict, finding.clue
    advice = clue.advice
    messages = "; ".join(reason.message for reason in verdict.reasons[:2])
    state = verdict.state
    if state is State.STALE:
        first = verdict.reasons[0] if verdict.reasons else None
        reason = f"{first.code}: {first.message}" if first else "stale"
        if len(reason) > 100:
            reason = reason[:99] + "…"
        command = f"lockwatch break {shlex.quote(lock.id)} --reason {shlex.quote(reason)}"
        return {"action": "break", "text": f"stale: {command}", "command": command}
    if state is State.ACTIVE:
        return {
            "action": "wait",
            "text": f"wait: {_who(lock, verdict)} is at work"
            + (f" ({messages})" if messages else ""),
            "command": None,
        }
    if state is State.WAITING:
        return {
            "action": "wait",
            "text": f"wait: it waits itself ({messages or 'for its blocker'})",
            "command": None,
        }
    if state is State.FREE:
        text = "retry: nobody holds it now"
        return {
            "action": "retry",
            "text": text + (f"; {advice}" if advice else ""),
            "command": None,
        }
    if state is State.INVALID:
        text = f"fix: {messages or 'it cannot be read as its format'}"
        return {"action": "fix", "text": text + (f"; {advice}" if advice else ""), "command": None}
    return {
        "action": "check",
        "text": f"check by hand: {messages or 'nobody can tell from here'}",
        "command": None,
    }


def _print_text(clues: Sequence[Clue], look: Look) -> None:
    def say(line: str) -> None:
        click.echo(printable(line))

    for finding in look.findings:
        lock, verdict = finding.lock, finding.verdict
        say(("likely: " if finding.likely else "") + lock.id)
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
        say(f"  next:   {next_step(finding)['text']}")
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
            if look.looked_at:
                places = "; ".join(look.looked_at)
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
        record["next_step"] = {**next_step(finding), "advice": finding.clue.advice}
        record["likely"] = finding.likely
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
