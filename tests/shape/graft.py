"""A copy of lockwatch with one more source in it, as its contributor would add
it: the package dropped into `lockwatch/sources/`, and one entry added to the
registry's list. Nothing else of the copy is touched, and nothing is patched at
run time: the copy's CLI and dashboard run in their own interpreters with the
copy first on PYTHONPATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEACON = Path(__file__).resolve().parent / "beacon"
REGISTRY = Path("lockwatch/sources/registry.py")
# The registry's list of sources, up to its closing parenthesis.
_SOURCES = re.compile(r"^SOURCES: .*?= \(\n.*?^\)", re.MULTILINE | re.DOTALL)


def add_entry(registry: str, entry: str) -> str:
    """`registry`'s text with `entry` as one more line at the end of SOURCES."""
    found = _SOURCES.search(registry)
    assert found is not None, "the registry has no SOURCES list"
    end = found.end() - 1  # the closing parenthesis
    return registry[:end] + f"    {entry},\n" + registry[end:]


def graft(into: Path, package: Path = BEACON, name: str = "beacon") -> Path:
    """lockwatch copied into `into`, with `package` as `lockwatch.sources.<name>`
    and its one registry entry; `into`, to put first on PYTHONPATH."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "lockwatch", into / "lockwatch", ignore=ignore)
    # The built-in themes, beside the package as in a checkout.
    shutil.copytree(ROOT / "themes", into / "themes", ignore=ignore)
    shutil.copytree(package, into / "lockwatch" / "sources" / name, ignore=ignore)
    registry = into / REGISTRY
    registry.write_text(add_entry(registry.read_text(), f'LazySource("lockwatch.sources.{name}")'))
    return into


def environ(copy: Path, **extra: str) -> dict[str, str]:
    """The environment of a run of the copy: it first on the path (before the
    installed lockwatch), the sandboxed HOME and XDG directories inherited."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "LOCKWATCH_"))}
    env.update(PYTHONPATH=str(copy), **extra)
    return env


def run(copy: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """`lockwatch ARGS` of the copy, in an interpreter of its own."""
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", *args],
        env=environ(copy, **extra),
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
