"""Keys under churn: how long `?` (the help screen) takes to show while lock files
churn at 1,000 operations a second, against the same key on the same locks at
rest, in one run.

The dashboard runs headless (`App.run_test`) on a real FileFeed over the churn
tree (benchmarks/churn.py: 808 lock files in five formats, written atomically
and in place, taken, rewritten and released by 4 writer processes). Each
measurement presses `?` and times it from the key to the paint of the help
screen; escape closes it again (timed too), then a random pause of 0.2-0.6 s.
"Painted" is the screen update turned into terminal bytes, as on a terminal
(headless Textual stops short of that: this benchmark does that step too).

The baseline is the same measurement with the writers stopped and their locks
left in place, before the churn starts. Target (issue 15): the 95th percentile
of `?` under churn <= 0.25 s; the ratio to the baseline says what the churn
costs.

    python benchmarks/bench_keys_under_churn.py --quick     # 15 presses each
    python benchmarks/bench_keys_under_churn.py             # 40 presses each
    python benchmarks/bench_keys_under_churn.py --presses 200 --rate 1000 --locks 808
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from churn import Churn
from rich.console import RenderableType
from textual._compositor import CompositorUpdate
from textual.pilot import Pilot
from textual.screen import Screen

from lockwatch.sources.files.watch import FileFeed
from lockwatch.ui.app import LockwatchApp

TARGET_P95_S = 0.25
SIZE = (160, 50)
TIMEOUT_S = 30.0


class Paints:
    """Every screen update as it is painted: when, and of which screen."""

    def __init__(self, app: LockwatchApp) -> None:
        self.app = app
        # (whether the base screen is awaited, and the future its paint resolves)
        self.waiting: tuple[bool, asyncio.Future[float]] | None = None
        display = app._display

        def painted(screen: Screen[Any], renderable: RenderableType | None) -> None:
            display(screen, renderable)
            if isinstance(renderable, CompositorUpdate):
                renderable.render_segments(app.console)  # what a terminal would be sent
            if renderable is None or self.waiting is None:
                return
            base, future = self.waiting
            if (screen is self.base) == base and not future.done():
                future.set_result(time.perf_counter())

        app._display = painted  # type: ignore[method-assign]
        self.base: Screen[Any] = app.screen

    async def key(self, pilot: Pilot[None], key: str, *, base: bool) -> float:
        """Seconds from pressing `key` to the paint of a screen other than the base
        one (base=False) or of the base one again (base=True)."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting = (base, future)
        start = time.perf_counter()
        press = asyncio.create_task(pilot.press(key))
        try:
            end = await asyncio.wait_for(future, TIMEOUT_S)
        finally:
            self.waiting = None
            await press
        if (self.app.screen is self.base) != base:
            raise SystemExit(f"{key!r} did not {'close' if base else 'open'} the help screen")
        return end - start


async def presses(
    pilot: Pilot[None], paints: Paints, count: int, rng: random.Random
) -> tuple[list[float], list[float]]:
    opened, closed = [], []
    for _ in range(count):
        await asyncio.sleep(rng.uniform(0.2, 0.6))
        opened.append(await paints.key(pilot, "question_mark", base=False))
        await asyncio.sleep(0.1)
        closed.append(await paints.key(pilot, "escape", base=True))
    return opened, closed


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def describe(label: str, values: list[float]) -> str:
    return (
        f"  {label:<34s}median {statistics.median(values) * 1000:6.0f} ms"
        f"  p95 {p95(values) * 1000:6.0f} ms  max {max(values) * 1000:6.0f} ms"
    )


async def measure(root: Path, args: argparse.Namespace) -> int:
    rng = random.Random(0)
    host = os.uname().nodename
    with Churn(root, locks=args.locks, rate=args.rate, writers=args.writers) as churn:
        churn.wait_started()
        churn.stop()  # the locks stay: the baseline is the same board at rest
        feed = FileFeed([str(root)], host=host)
        if hasattr(feed, "prefetch"):  # as SelectedFiles.feeds does (older lockwatch: no)
            feed.prefetch()
        app = LockwatchApp([feed], host=host, readonly=True)
        async with app.run_test(size=SIZE) as pilot:
            paints = Paints(app)
            deadline = time.monotonic() + TIMEOUT_S
            while len(app.board) < args.locks * 0.9:
                if time.monotonic() > deadline:
                    raise SystemExit(f"the dashboard shows {len(app.board)} locks")
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.5)  # the settling rescan
            quiet_open, quiet_close = await presses(pilot, paints, args.presses, rng)
            with Churn(root, locks=args.locks, rate=args.rate, writers=args.writers) as busy:
                await asyncio.sleep(3.0)  # into the churn
                events_before = app.board.generation
                started = time.perf_counter()
                churn_open, churn_close = await presses(pilot, paints, args.presses, rng)
                elapsed = time.perf_counter() - started
                changed = app.board.generation - events_before
                done = busy.stop()
    print(
        f"locks: {args.locks}, churn: {args.rate:.0f} ops/s asked by {args.writers} writers"
        f" ({done / (elapsed + 3.0):.0f} ops/s done), presses: {args.presses} each,"
        f" board changes during the presses: {changed}"
    )
    print("at rest (baseline):")
    print(describe("?  to the help screen painted", quiet_open))
    print(describe("escape to the table painted", quiet_close))
    print("under churn:")
    print(describe("?  to the help screen painted", churn_open))
    print(describe("escape to the table painted", churn_close))
    ratio = p95(churn_open) / p95(quiet_open)
    verdict = p95(churn_open) <= TARGET_P95_S
    print(f"  p95 of ? under churn / at rest: {ratio:5.2f}")
    target = TARGET_P95_S * 1000
    print(f"  p95 of ? under churn: {p95(churn_open) * 1000:.0f} ms (target <= {target:.0f} ms)")
    print("PASS" if verdict else "FAIL")
    return 0 if verdict else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--locks", type=int, default=808)
    parser.add_argument("--rate", type=float, default=1000.0, help="lock operations a second")
    parser.add_argument("--writers", type=int, default=4, help="writer processes")
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument("--quick", action="store_true", help="15 presses each")
    args = parser.parse_args()
    if args.quick:
        args.presses = 15
    workdir = Path(tempfile.mkdtemp(prefix="lockwatch-bench-keys-"))
    try:
        return asyncio.run(measure(workdir / "locks", args))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
