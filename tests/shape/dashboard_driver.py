"""The dashboard of whatever `lockwatch` is first on the path (the grafted copy
of tests/shape/test_new_source.py), started as `lockwatch watch ARGS` starts it
and driven with Textual's pilot: it waits for the lease LATE (put on the server
after the first poll: the feed polls), breaks LAPSED with `b`, a reason and the
confirm button, waits for the notification and for the next poll to drop the
row, and prints what it saw as one JSON line. Run as a script:

    python dashboard_driver.py LAPSED_ID LATE_ID -- WATCH_ARGS...
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from typing import Any

STEPS = 600  # pauses of 0.05 s: a failing run's bound, not a wait for time to pass


async def until(pilot: Any, condition: Callable[[], bool], what: str) -> None:
    for _ in range(STEPS):
        if condition():
            return
        await pilot.pause(0.05)
    raise SystemExit(f"never happened: {what}")


def notes(app: Any) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def drive(lapsed: str, late: str, args: list[str]) -> dict[str, Any]:
    import lockwatch
    from lockwatch.cli.watch import build_app, watch
    from lockwatch.cli.where import resolve_targets
    from lockwatch.ui.table import LockTable

    values = watch.make_context("watch", args).params
    targets = resolve_targets(values, values.get("config_path"))
    app = build_app(targets, host=os.uname().nodename, audit_log=values["audit_log"])
    app.animation_level = "none"
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: late in app.board and lapsed in app.board, "both leases")
        app.query_one("#table", LockTable).select(lapsed)
        await pilot.pause()
        await pilot.press("b")
        await until(pilot, lambda: bool(app.screen.query("#reason")), "the confirmation")
        app.screen.query_one("#reason").focus()
        await pilot.pause()
        await pilot.press(*"cron died, INC-9")
        app.screen.query_one("#confirm").focus()
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: any("dropped" in n for n in notes(app)), "the break's note")
        await until(pilot, lambda: lapsed not in app.board, "the next poll without it")
        return {
            "lockwatch": lockwatch.__file__,
            "rows": sorted(app.rows.ids),
            "notes": notes(app),
        }


def main() -> None:
    lapsed, late, sep, *args = sys.argv[1:]
    assert sep == "--", sys.argv
    print(json.dumps(asyncio.run(drive(lapsed, late, args))))


if __name__ == "__main__":
    main()
