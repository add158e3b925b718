"""Postgres for the headless commands: which servers, with which settings, polled once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from lockwatch.config import Config
from lockwatch.sources.postgres.source import PgSource


def make_sources(
    dsns: Sequence[str], config: Config, idle_after: float | None, all_rows: bool
) -> list[PgSource]:
    return [
        PgSource(
            dsn,
            idle_after=config.pg_idle_after if idle_after is None else idle_after,
            all_rows=all_rows or config.pg_all,
            names=config.advisory,
        )
        for dsn in dsns
    ]


def poll_once(sources: Sequence[PgSource]) -> None:
    """Poll every server at once; each source keeps its snapshot and status."""

    async def run() -> None:
        try:
            await asyncio.gather(*(source.poll() for source in sources))
        finally:
            await asyncio.gather(*(source.close() for source in sources))

    if sources:
        asyncio.run(run())
