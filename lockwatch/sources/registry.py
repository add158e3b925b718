"""Every source lockwatch has, in one list: `ls`, the dashboard, the config
file, recordings, actions and `--help` are built from it. A new source is a
package under lockwatch/sources/ with a `plugin.SOURCE`, and one line here.

Order matters only for what is shown first (listings, --help).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lockwatch.sources.contract import Decorator, Selected, Source, Wanted
from lockwatch.sources.etcd.plugin import SOURCE as ETCD
from lockwatch.sources.files.plugin import SOURCE as FILES
from lockwatch.sources.kernel.plugin import SOURCE as KERNEL
from lockwatch.sources.postgres.plugin import SOURCE as POSTGRES
from lockwatch.sources.redis.plugin import SOURCE as REDIS
from lockwatch.sources.remote.plugin import SOURCE as REMOTE

SOURCES: tuple[Source, ...] = (FILES, POSTGRES, KERNEL, REMOTE, REDIS, ETCD)


def by_name(name: str) -> Source | None:
    return next((source for source in SOURCES if source.name == name), None)


def label(name: str) -> str:
    """The dashboard's short name for source `name` (a recording may name a
    source this build lacks: its name, then)."""
    source = by_name(name)
    return source.label if source is not None else name


def for_id(lock_id: str) -> Source | None:
    """The source whose locks have ids like `lock_id` (file:, pg:, kernel:)."""
    head = lock_id.partition(":")[0]
    return next((source for source in SOURCES if source.id_prefix == head), None)


def options() -> list[Decorator]:
    """Every source's CLI options, in registry order."""
    return [option for source in SOURCES for option in source.options()]


def read_config(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Each source's settings from its own tables of lockwatch.toml."""
    return {source.name: source.read_config(data, where) for source in SOURCES}


def select(wanted: Wanted) -> list[tuple[Source, Selected]]:
    """The sources this run looks at, configured."""
    others = any(source.asked(wanted.values) for source in SOURCES if source is not FILES)
    if others != wanted.others_asked:
        from dataclasses import replace

        wanted = replace(wanted, others_asked=others)
    chosen = []
    for source in SOURCES:
        selected = source.select(wanted)
        if selected is not None:
            chosen.append((source, selected))
    return chosen


def record_types() -> tuple[type, ...]:
    return tuple(kind for source in SOURCES for kind in source.record_types)


def help_lines() -> list[str]:
    """One line per source, for --help epilogs."""
    return [f"  {source.name:<9} {source.summary}" for source in SOURCES]
