"""Every source lockwatch has, in one list: `ls`, the dashboard, the config
file, recordings, actions and `--help` are built from it. A new source is a
package under lockwatch/sources/ with a `declared.DECLARED` (what every run asks
of it) and a `plugin.SOURCE` (the rest, loaded when used: sources/lazy.py), and
one `LazySource` line here.

Order matters only for what is shown first (listings, --help).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lockwatch.config import Config, load, refuse_unknown
from lockwatch.model.facts import Facts
from lockwatch.sources.contract import Decorator, LogFolding, Selected, Source, Wanted
from lockwatch.sources.files.plugin import SOURCE as FILES
from lockwatch.sources.lazy import LazySource

# Files are listed by almost every run: its plugin is the entry. Every other source
# is a LazySource: its declared.py now, its plugin.py once the run uses it.
SOURCES: tuple[Source, ...] = (
    FILES,
    LazySource("lockwatch.sources.postgres"),
    LazySource("lockwatch.sources.kernel"),
    LazySource("lockwatch.sources.remote"),
    LazySource("lockwatch.sources.redis"),
    LazySource("lockwatch.sources.etcd"),
    LazySource("lockwatch.sources.mysql"),
    LazySource("lockwatch.sources.zookeeper"),
    LazySource("lockwatch.sources.k8s"),
)


def by_name(name: str) -> Source | None:
    return next((source for source in SOURCES if source.name == name), None)


def holder_gone_codes() -> frozenset[str]:
    """Every source's reason codes that say a lock's holder is gone or its claim
    lapsed (contract.Declared): what the history's episodes call `holder_died`."""
    codes: set[str] = set()
    for source in SOURCES:
        codes.update(getattr(source, "holder_gone", ()))
    return frozenset(codes)


def log_folding(host: str, server: str) -> LogFolding | None:
    """A fold of a server's log of its lock waits (`--pg-log`), from the source
    that reads its server's log (contract.Declared's `fold_log`); None: no
    source of this build does."""
    for source in SOURCES:
        fold = getattr(source, "fold_log", None)
        if fold is not None:
            folding: LogFolding = fold(host, server)
            return folding
    return None


def label(name: str) -> str:
    """The dashboard's short name for source `name` (a recording may name a
    source this build lacks: its name, then)."""
    source = by_name(name)
    return source.label if source is not None else name


def source_names() -> dict[str, str]:
    """What may be typed for a source (the filter's `source:`): each source's
    name and short name, in registry order -> its name."""
    names: dict[str, str] = {}
    for source in SOURCES:
        if foreign(source.name):
            continue  # its locks keep their own host's source names
        names.setdefault(source.name, source.name)
        names.setdefault(source.label, source.name)
    return names


def foreign(name: str) -> bool:
    """Whether source `name` only passes on other hosts' locks, judged there
    (their facts say `foreign`): theirs to count and export, not ours."""
    found = by_name(name)
    return found is not None and any(
        issubclass(kind, Facts) and kind.foreign for kind in found.record_types
    )


def for_id(lock_id: str) -> Source | None:
    """The source whose locks have ids like `lock_id` (file:, pg:, kernel:)."""
    head = lock_id.partition(":")[0]
    return next((source for source in SOURCES if source.id_prefix == head), None)


def id_prefix(lock_id: str) -> str | None:
    """Which kind of id this is (`file`, `pg`, `kernel`, ...), or None: the
    prefix of a source this build has."""
    source = for_id(lock_id) if ":" in lock_id else None
    return source.id_prefix if source is not None else None


def options() -> list[Decorator]:
    """Every source's CLI options, in registry order."""
    return [option for source in SOURCES for option in source.options()]


def read_config(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Each source's settings from its own tables of lockwatch.toml."""
    return {source.name: source.read_config(data, where) for source in SOURCES}


def configured(config: Config) -> Config:
    """`config` with every source's settings read from its own tables (a bad
    table: ConfigError, saying where and why; so is a key no reader asked for)."""
    sources = read_config(config.tables, config.where)
    refuse_unknown(config.tables, config.where)
    return replace(config, sources=sources)


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    """The config in force (`config.load`), with the sources' settings read."""
    return configured(load(explicit))


def others_asked(values: Mapping[str, Any]) -> bool:
    """Whether the CLI flags ask for a source other than files by name (--pg,
    --kernel): a run without PATH then looks at those only, not at the current
    directory."""
    return any(source.asked(values) for source in SOURCES if source is not FILES)


def with_others_asked(wanted: Wanted) -> Wanted:
    """`wanted` with `others_asked` as its flags say."""
    others = others_asked(wanted.values)
    return wanted if others == wanted.others_asked else replace(wanted, others_asked=others)


def select(wanted: Wanted) -> list[tuple[Source, Selected]]:
    """The sources this run looks at, configured."""
    wanted = with_others_asked(wanted)
    chosen = []
    for source in SOURCES:
        selected = source.select(wanted)
        if selected is not None:
            chosen.append((source, selected))
    return chosen


def record_types() -> tuple[type, ...]:
    return tuple(kind for source in SOURCES for kind in source.record_types)


def help_rows(ids: bool = False) -> list[tuple[str, str]]:
    """(name, summary) per source, in registry order, for --help (`lockwatch
    --help`; with `ids`, its lock ids' prefix for the name, for the action
    commands'): from the declarations, no plugin loaded."""
    return [(f"{s.id_prefix}:" if ids else s.name, s.summary) for s in SOURCES]


def help_lines() -> list[str]:
    """One line per source, for --help epilogs."""
    return [f"  {name:<9} {summary}" for name, summary in help_rows()]
