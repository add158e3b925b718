"""Regenerate the README's screenshot, docs/screenshot.svg:

    .venv/bin/python -m tests.ui.make_screenshot [--output PATH] [--size 140x40]

The dashboard as an incident looks: the mixed scenario of tests/ui/fakes.py (every file
format in every state, a Postgres blocking chain), with the detail pane open on the
session idle in transaction that holds everybody up. The clock is frozen and the feeds
are fakes, so the file only changes when the UI does.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from lockwatch.ui.table import LockTable
from tests.ui.fakes import PG_ROOT_ID, make_app, mixed_scenario, settle

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUTPUT = ROOT / "docs" / "screenshot.svg"
DEFAULT_SIZE = (140, 40)


async def capture(size: tuple[int, int] = DEFAULT_SIZE, select: str = PG_ROOT_ID) -> str:
    """The SVG of the main view with `select`'s details open."""
    app = make_app(mixed_scenario())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app.query_one("#table", LockTable).select(select)
        await pilot.press("enter")
        await settle(pilot)
        return app.export_screenshot(title="lockwatch")


def _size(text: str) -> tuple[int, int]:
    width, _, height = text.lower().partition("x")
    return int(width), int(height)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--size", type=_size, default=DEFAULT_SIZE, help="COLUMNSxROWS")
    args = parser.parse_args(argv)
    svg = asyncio.run(capture(args.size))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(svg, encoding="utf-8")
    print(args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
