"""The contract every source keeps, so `ls`, the dashboard, the config file,
recordings, actions and `--help` are all built from one registry
(lockwatch/sources/registry.py) and a new source is one package.

A source (in the spirit of harlequin's adapters) says:
- its `name` (the JSON contract's `source`), the dashboard's short `label` for
  it (at most 4 characters: the SRC column), its lock ids' `id_prefix`, and one
  line of `summary` for `--help`;
- the CLI `options` it owns (shared by `ls` and the dashboard) and the
  `config_tables` of lockwatch.toml it reads (`read_config` checks them; with
  none of them in the file it is handed None, its defaults: sources/lazy.py);
- `select`: from the run's CLI values and config, whether it runs and how —
  the answer, a `Selected`, collects a one-shot listing (`collect`, for `ls`),
  and builds live feeds for the dashboard (`feeds`, emitting change sets);
- `find`: a lock by id, judged now, for an action;
- `clues`: what it recognises in text an operator pasted (its tools' error
  messages: paths, ids, pids, lock names, a server's "lock wait timeout"),
  for `lockwatch why`;
- `actions`: its actions provider (`ActionProvider`: which actions its locks
  offer, their plans, carrying them out with compare-and-swap, what the audit
  log names, the action commands' options), or None; `record_types`: the model
  types its locks carry, for recordings.

Source packages import their heavy parts (psycopg, inotify_simple) inside these
methods, so `lockwatch ls` on files never pays for a driver it does not use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lockwatch.model.lock import Lock
from lockwatch.model.slots import lean_dataclass
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import Verdict

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.config import Config
    from lockwatch.model.action import Asked, Doing, Done, Holding, Kind, Plan
    from lockwatch.model.blocking import BlockingTree
    from lockwatch.model.clues import Clue
    from lockwatch.model.facts import Row
    from lockwatch.model.history import WaitSpan
    from lockwatch.sources.feed import Feed

Decorator = Callable[[Any], Any]

# Seconds a poll may take before its source is down (stalled), unless its
# selection names its own (a remote's is its whole-answer timeout). Here, not in
# polled.py: every selection names it, and `ls` loads polling only to poll.
DEFAULT_DEADLINE = 10.0


class SourceError(Exception):
    """A mistake in what the operator asked of a source (a bad flag value, an
    unusable config entry): shown as a usage error, one line, exit 2."""


class LookupFailed(Exception):
    """The source could not be asked (a server is down): an action fails, exit 3."""


@lean_dataclass(frozen=True)
class Wanted:
    """What one run asks of the sources."""

    paths: tuple[str, ...]  # PATH arguments as given
    values: Mapping[str, Any]  # every CLI option's value, by click parameter name
    config: Config
    environ: Mapping[str, str]
    # Some source other than files was asked for by a flag (--pg, --kernel): a
    # run without PATH then looks at those only, not at the current directory.
    others_asked: bool = False

    def settings(self, source: str) -> Any:
        """The source's own settings from the config file (`read_config`'s answer)."""
        return self.config.sources.get(source)


@lean_dataclass(frozen=True)
class ListingRequest:
    """How `ls` wants a one-shot picture."""

    now: datetime
    host: str
    as_json: bool  # rendered JSON arrays (fast path) rather than Lock objects
    jobs: int  # processes it may use


@lean_dataclass
class Collected:
    """One source's one-shot picture for `ls`."""

    # Locks with their verdicts, for the table (and, when `arrays` is empty, JSON).
    assessed: list[tuple[Lock, Verdict]] = field(default_factory=list)
    # The same locks already rendered as JSON arrays of lock records (`--json`).
    arrays: list[bytes] = field(default_factory=list)
    statuses: list[SourceStatus] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)
    stale: int = 0
    blocking: list[tuple[str, BlockingTree]] = field(default_factory=list)
    # Problems that are the operator's (a PATH that does not exist): exit 2.
    usage_errors: bool = False
    # Lines for stderr (a server that could not be polled, ...); raw text.
    warnings: list[str] = field(default_factory=list)
    # Where the source looked, for "No locks under ..." (e.g. "under /srv").
    places: list[str] = field(default_factory=list)


@lean_dataclass(frozen=True)
class Choice:
    """One way an action may be carried out, offered in the dashboard's
    confirmation as the CLI offers it by options (a kernel break's signal)."""

    label: str  # in words, as the dialog shows it: "TERM, then KILL after 10 s"
    # What the plan is given for it, by the names the provider reads (`Asked.given`).
    given: tuple[tuple[str, Any], ...]


@lean_dataclass(frozen=True)
class Choices:
    """The ways an action on a lock may be carried out: the first is the default."""

    what: str  # what is chosen, one word: "signal"
    options: tuple[Choice, ...]


@lean_dataclass(frozen=True)
class Hint:
    """What a source tells a dashboard that shows no lock: what it looked for
    and where (when it runs), and what it could show that is not shown, with
    the flag that shows it. Cheap: no connection to anything."""

    looked_for: str = ""  # "*.lock and *.pid files ... under /srv"
    could_show: str = ""  # "2 kernel locks on files under /srv: --kernel shows them"


@runtime_checkable
class Hinting(Protocol):
    """A source with something to say to an empty dashboard (most have none)."""

    def hint(self, wanted: Wanted, running: bool) -> Hint | None:
        """What it tells an empty dashboard of this run (`running`: it was
        selected); None: nothing. Reads only local files (/proc), never a server."""
        ...


@runtime_checkable
class Walking(Protocol):
    """A selection that walks lock trees (the file source's PATHs)."""

    @property
    def lock_trees(self) -> tuple[str, ...]:
        """The trees it walks, as given ((): none)."""
        ...


# What `find` answers: the lock, its verdict now, and the locks around it (a
# holder's other locks, for the effect of an action); or why there is none.
Found = tuple[Lock, Verdict, list[Lock]]


# The dashboard's SRC column: every source's `label` fits it.
LABEL_WIDTH = 4


class Selected(Protocol):
    """A source configured for one run."""

    def collect(self, request: ListingRequest) -> Collected: ...

    def feeds(self, clock: Clock, host: str) -> Sequence[Feed]: ...


class Described(Protocol):
    """What a source says of itself, in its `declared.py` and its plugin alike."""

    name: str
    label: str  # at most LABEL_WIDTH characters
    id_prefix: str
    summary: str
    config_tables: tuple[str, ...]
    # How the dashboard names one of its places (a status's `name`): `title` in
    # the empty state ("PostgreSQL app@db:5432"), `status_word` before it in the
    # header ("pg "; a polled source's data also says its age there; "": none).
    title: str
    status_word: str
    # Its locks wait on each other (blocking trees, the Contention view).
    sees_waits: bool
    # Its servers' sessions wait on each other: each server (a status's name, its
    # locks' `wait_metrics_server()`) gets `lockwatch_<wait_metrics>_blocked_sessions`
    # and its kin in /metrics, and a blocking tree in listings; None: no servers.
    wait_metrics: str | None
    # Those series are labelled `<name>:<server>` (its locks' wait-for graphs' names)
    # rather than by the status's name alone.
    wait_label_prefixed: bool


class Source(Described, Protocol):
    @property
    def record_types(self) -> tuple[type, ...]:
        """The types its locks' facts are made of, for recordings."""
        ...

    @property
    def actions(self) -> ActionProvider | None:
        """What can be done to its locks, and how (None: nothing). Loaded when an
        action is planned: the CLI's start never pays for it."""
        ...

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        """click options of the action commands for this source's targets: with
        `kind` None, those every command takes (--pg); else `kind`'s own (--signal)."""
        ...

    def options(self) -> Sequence[Decorator]:
        """click decorators for `ls` and the dashboard, outermost first."""
        ...

    def asked(self, values: Mapping[str, Any]) -> bool:
        """Whether the CLI flags ask for this source by name (--pg, --kernel)."""
        ...

    def read_config(self, tables: Mapping[str, Any], where: str) -> Any:
        """Its settings from its config tables (raise ConfigError when unusable)."""
        ...

    def select(self, wanted: Wanted) -> Selected | None:
        """How it runs this time, or None when it does not (raise SourceError
        for a bad option value)."""
        ...

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        """The lock `target` (an id of this source, or a path for files) names,
        judged now, for an action; or why there is none. Raise SourceError for
        a target that names nothing this source could have, LookupFailed when
        the source cannot be asked."""
        ...

    def clues(self, text: str) -> Sequence[Clue]:
        """What `text` (an error message, a path, a statement the operator pasted)
        names that this source can look up: paths, pids, lock names, hints, with
        the tool whose message it is and its docs' advice (`lockwatch why`). Pure:
        no I/O; its ids are recognised by the registry (`for_id`)."""
        ...


class LogFolding(Protocol):
    """A server's own log of its lock waits, folded line by line into wait
    spans (origin `log`) as it is read: PostgreSQL's `log_lock_waits` lines."""

    def feed(self, line: str) -> None:
        """One line of the log, as read (cut at its bound, no newline)."""
        ...

    def take(self) -> list[WaitSpan]:
        """The waits ended since the last `take` (a wait still going is kept)."""
        ...

    def done(self) -> list[WaitSpan]:
        """Every wait left, the unended ones ending at the last line read (a log
        folded once, not followed)."""
        ...


class Declared(Described, Protocol):
    """What a source declares in its light `declared.py` (`DECLARED`): what every
    run asks of every source, answered without loading its plugin
    (`sources/lazy.py`). Its plugin's `SOURCE` answers the same, and the rest.
    Its base (`sources/declaring.py`'s `Declaring`, or `ServerDeclared`) gives
    every member but `name` and `summary` a default, so it says what differs.

    Two more a source may declare (read with a default, `sources/lazy.py`):
    `holder_gone`, the reason codes of its verdicts that say a lock's holder is
    gone or its claim lapsed (the history's `holder_died`: an expired session, a
    Lease nobody renews), and `fold_log(host, server) -> LogFolding`, for a
    source whose server logs its lock waits (`--pg-log`)."""

    def options(self) -> Sequence[Decorator]: ...

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        """As `Source.action_options`: declared, so that the action commands and
        `lockwatch --help` are built without loading every source's plugin."""
        ...

    def asked(self, values: Mapping[str, Any]) -> bool: ...

    def clues(self, text: str) -> Sequence[Clue]: ...

    def may_run(self, wanted: Wanted) -> bool:
        """Whether `select` may choose it this run: False only when it surely would
        not (nothing asks for it: no flag, no config table, no variable)."""
        ...


class ActionProvider(Protocol):
    """A source's actions: `lockwatch.actions` (the CLI's commands, the
    dashboard's session, the audited executor) asks this and never names a
    source. `ActionsBase` below gives every default."""

    kinds: frozenset[Kind]  # the actions its locks offer
    takes_paths: bool  # its TARGETs may be plain paths (not ids)

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        """From the command's option values and the config: how its actions reach
        their servers (`Doing.reach`). Raise SourceError for an unusable value."""
        ...

    def screen(self, kind: Kind, lock: Lock, verdict: Verdict) -> Plan | None:
        """A refusal before every other check (another host's lock), or None."""
        ...

    def holding(self, lock: Lock, operator: str, pid: int | None) -> Holding:
        """Whether lockwatch holds `lock` for `operator` (`pid`: the one a pid
        format records), so that `release` may let go of it."""
        ...

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        """What `kind` would do to `lock`, or why it may not (refused)."""
        ...

    def run(self, plan: Plan, doing: Doing) -> Done:
        """Carry out `plan` with compare-and-swap: raise ActionRefused when the lock
        is not as seen (nothing touched), ActionFailed when it failed part-way."""
        ...

    def target(self, lock: Lock) -> dict[str, Any]:
        """What the audit log's `target` says of `lock` beyond source, id, name,
        format and path (never a password)."""
        ...

    def unseen_id(self, target: str) -> str:
        """The id a TARGET of this source that named no lock is audited under."""
        ...

    def unseen_target(self, lock_id: str) -> dict[str, Any]:
        """The audit log's `target` for an id that named no lock now."""
        ...

    def moved_aside(self, path: str, tombstone_dir: str | None) -> bool:
        """Whether a lock once at `path` (a TARGET typed as a path, gone now) was
        broken into its tombstone directory: an action that lost the race to it,
        not a mistyped path (`tombstone_dir`: the configured directory)."""
        ...

    def seen_hash(self, lock: Lock) -> str | None:
        """sha256 hex of what the operator saw, when the lock has no bytes (`sha256`)."""
        ...

    def where(self, lock: Lock) -> str | None:
        """Where the lock is, for a confirmation, when it has no path."""
        ...

    def confirm_rows(self, lock: Lock, verdict: Verdict, now: datetime) -> Sequence[Row]:
        """A confirmation's lines on how long it is held, when the verdict has no age."""
        ...

    def rejudge(self, lock: Lock, clock: Clock, host: str) -> Verdict:
        """`lock`'s verdict as things are now (a plan's `recheck`)."""
        ...

    def choices(self, kind: Kind, lock: Lock) -> Choices | None:
        """The ways `kind` may be carried out on `lock` that the operator picks
        from in a confirmation (each re-plans with its `given`); None: one way."""
        ...

    def tombstone_place(self, tombstone_dir: str | None) -> str | None:
        """Where its broken locks go, in words (`tombstone_dir`: the configured
        directory); None: breaking one moves nothing aside."""
        ...

    # A lock lockwatch took and holds by writing it (a stolen lock file): its
    # heartbeat rewrites it, and quitting lets go of it as it is then.

    def refreshed(self, format: str, content: Any, now: datetime) -> bytes | None:
        """What a held lock of `format` (`content`: as written, decoded) says
        at `now`, its heartbeat; None: its format is never refreshed."""
        ...

    def rewrite(self, path: str, expected_sha256: str, content: bytes, *, token: str) -> None:
        """Write `content` over the held lock at `path` if it is still what
        lockwatch wrote (`expected_sha256`): raise ActionRefused when it is not."""
        ...

    def reload(self, path: str) -> Lock | None:
        """The held lock at `path` as it is now; None: gone, or not a lock."""
        ...


class ActionsBase:
    """Defaults for an `ActionProvider`: a source overrides what its locks need."""

    name: str = ""  # the source's name (the audit log's `target.source`)
    kinds: frozenset[Kind] = frozenset()
    takes_paths = False

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        return {}

    def screen(self, kind: Kind, lock: Lock, verdict: Verdict) -> Plan | None:
        return None

    def holding(self, lock: Lock, operator: str, pid: int | None) -> Holding:
        from lockwatch.model.action import Holding
        from lockwatch.model.handover import held_by_lockwatch

        return Holding(held_by_lockwatch(lock, pid, operator))

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        from lockwatch.model.action import refused

        why = f"{lock.source} locks cannot be acted on"
        return refused(kind, lock, verdict, "unsupported", why)

    def run(self, plan: Plan, doing: Doing) -> Done:
        from lockwatch.model.action import ActionRefused

        raise ActionRefused("unsupported", f"{plan.lock.source} locks cannot be acted on")

    def target(self, lock: Lock) -> dict[str, Any]:
        return {}

    def unseen_id(self, target: str) -> str:
        return target

    def unseen_target(self, lock_id: str) -> dict[str, Any]:
        return {"source": self.name, "id": lock_id}

    def moved_aside(self, path: str, tombstone_dir: str | None) -> bool:
        return False

    def seen_hash(self, lock: Lock) -> str | None:
        return None

    def where(self, lock: Lock) -> str | None:
        return None

    def confirm_rows(self, lock: Lock, verdict: Verdict, now: datetime) -> Sequence[Row]:
        return ()

    def choices(self, kind: Kind, lock: Lock) -> Choices | None:
        return None

    def tombstone_place(self, tombstone_dir: str | None) -> str | None:
        return None

    def refreshed(self, format: str, content: Any, now: datetime) -> bytes | None:
        return None

    def rewrite(self, path: str, expected_sha256: str, content: bytes, *, token: str) -> None:
        from lockwatch.model.action import ActionRefused

        raise ActionRefused("unsupported", f"{self.name} locks are not held by writing them")

    def reload(self, path: str) -> Lock | None:
        return None

    def rejudge(self, lock: Lock, clock: Clock, host: str) -> Verdict:
        from lockwatch.model.verdict import evaluate
        from lockwatch.sources.processes import HostProcesses

        return evaluate(lock, HostProcesses(), clock, host)
