"""A/B of two lockwatch checkouts in one run: is this one slower than an earlier one?

Issue 43 asked that reshaping the code leave `ls` over bench_scan's 10,000 lock files
and `ls --pg` over bench_postgres's load no slower. This runs the same command from
two checkouts (each with its own `.venv`, made as the README's second line makes it),
alternating round by round on the same tree and the same server load, and prints the
median of the rounds' ratios after/before, wall and CPU (user + system, forked workers
included). A ratio at or below 1.0 (within the noise the rounds' spread shows) is
"no slower".

    python benchmarks/bench_ab.py --before ../old-checkout [--after .] [--rounds 9]
        [--pg postgresql://postgres@127.0.0.1:5432/postgres] [--no-pg]

The dashboard's own A/B is bench_ui.py run from each checkout: its figures are ratios
against a DataTable baseline measured in the same process, so they compare across runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import load
from bench_scan import populate, run

DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def python_of(checkout: Path) -> str:
    python = checkout / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{checkout}: no .venv (make it as the README's second line does)")
    compile_checkout(python)
    return str(python)


def compile_checkout(python: Path) -> None:
    """Byte-compiled first, as an installed copy is (see bench_scan.compile_package)."""
    code = (
        "import compileall, os, lockwatch;"
        " compileall.compile_dir(os.path.dirname(lockwatch.__file__), quiet=1)"
    )
    subprocess.run([str(python), "-c", code], check=True)


def alternate(before: list[str], after: list[str], rounds: int) -> tuple[list[float], list[float]]:
    """Median-ready ratios after/before, wall and CPU, one pair per round."""
    run(before), run(after)  # warm the page cache and both imports
    walls, cpus = [], []
    for _ in range(rounds):
        wall_b, _, cpu_b = run(before)
        wall_a, _, cpu_a = run(after)
        walls.append(wall_a / wall_b)
        cpus.append(cpu_a / cpu_b)
    return walls, cpus


def report(label: str, walls: list[float], cpus: list[float]) -> None:
    print(
        f"{label:24s} wall {statistics.median(walls):5.2f}"
        f" (rounds {min(walls):.2f}-{max(walls):.2f})"
        f"   CPU {statistics.median(cpus):5.2f} (rounds {min(cpus):.2f}-{max(cpus):.2f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True, help="the earlier checkout")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--pg", default=DSN, help="the server bench_postgres loads")
    parser.add_argument("--no-pg", action="store_true", help="the scan only")
    args = parser.parse_args()
    before, after = python_of(args.before), python_of(args.after)
    print(f"after/before: {args.after} / {args.before}, {args.rounds} rounds")
    workdir = Path(tempfile.mkdtemp(prefix="lockwatch-ab-"))
    try:
        populate(workdir, args.files)
        scan = ["-m", "lockwatch", "ls", "--json", str(workdir)]
        report("ls --json (scan)", *alternate([before, *scan], [after, *scan], args.rounds))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not args.no_pg:
        with load(args.pg):
            pg = ["-m", "lockwatch", "ls", "--json", "--pg", args.pg]
            report("ls --json --pg", *alternate([before, *pg], [after, *pg], args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
