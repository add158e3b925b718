"""The lists of sources in `--help` (`lockwatch --help`, the action commands'),
built from the registry: a new source's line comes with its registry entry."""

from __future__ import annotations

import click


def sources_section(formatter: click.HelpFormatter, title: str, ids: bool = False) -> None:
    """Every registered source, its name (`ids`: its lock ids' prefix) and
    summary, as a --help section: a new source's line comes with its registry
    entry (its declaration's `summary`)."""
    from lockwatch.sources.registry import help_rows

    with formatter.section(title):
        formatter.write_dl(help_rows(ids))
