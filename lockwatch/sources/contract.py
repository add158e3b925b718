"""The contract every source keeps, so `ls`, the dashboard, the config file,
recordings, actions and `--help` are all built from one registry
(lockwatch/sources/registry.py) and a new source is one package.

A source (in the spirit of harlequin's adapters) says:
- its `name` (the JSON contract's `source`), the dashboard's short `label` for
  it (at most 4 characters: the SRC column), its lock ids' `id_prefix`, and one
  line of `summary` for `--help`;
- the CLI `options` it owns (shared by `ls` and the dashboard) and the
  `config_tables` of lockwatch.toml it owns (`read_config` checks them);
- `select`: from the run's CLI values and config, whether it runs and how —
  the answer, a `Selected`, collects a one-shot listing (`collect`, for `ls`),
  and builds live feeds for the dashboard (`feeds`, emitting change sets);
- `find`: a lock by id, judged now, for an action;
- `actions`: which actions its locks offer; `record_types`: the model types its
  locks carry, for recordings.

Source packages import their heavy parts (psycopg, inotify_simple) inside these
methods, so `lockwatch ls` on files never pays for a driver it does not use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from lockwatch.model.lock import Lock
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import Verdict

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.config import Config
    from lockwatch.model.blocking import BlockingTree
    from lockwatch.sources.feed import Feed

Decorator = Callable[[Any], Any]


class SourceError(Exception):
    """A mistake in what the operator asked of a source (a bad flag value, an
    unusable config entry): shown as a usage error, one line, exit 2."""


class LookupFailed(Exception):
    """The source could not be asked (a server is down): an action fails, exit 3."""


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class ListingRequest:
    """How `ls` wants a one-shot picture."""

    now: datetime
    host: str
    as_json: bool  # rendered JSON arrays (fast path) rather than Lock objects
    jobs: int  # processes it may use


@dataclass
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


# What `find` answers: the lock, its verdict now, and the locks around it (a
# holder's other locks, for the effect of an action); or why there is none.
Found = tuple[Lock, Verdict, list[Lock]]


# The dashboard's SRC column: every source's `label` fits it.
LABEL_WIDTH = 4


class Selected(Protocol):
    """A source configured for one run."""

    def collect(self, request: ListingRequest) -> Collected: ...

    def feeds(self, clock: Clock, host: str) -> Sequence[Feed]: ...


class Source(Protocol):
    name: str
    label: str  # at most LABEL_WIDTH characters
    id_prefix: str
    summary: str
    config_tables: tuple[str, ...]
    actions: frozenset[str]  # Kind values: break, steal, release, cancel
    record_types: tuple[type, ...]

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
