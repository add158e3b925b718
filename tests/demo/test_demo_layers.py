"""The demo's layers: the show never imports the UI or the CLI (the command builds the
dashboard on it), and the children stay light, since seventeen of them start at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_layers import PACKAGE, imported_modules


def test_the_demo_imports_no_ui_and_no_cli() -> None:
    for path in (PACKAGE / "demo").rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(("textual", "lockwatch.ui", "lockwatch.cli")), (
                f"{path.name} imports {name}"
            )


def test_children_import_only_the_standard_library() -> None:
    allowed = ("lockwatch.demo", "__future__", "psycopg")  # psycopg: the guardian, lazily
    for name in ("children.py", "guardian.py", "lockfiles.py"):
        for module in imported_modules(PACKAGE / "demo" / name):
            top = module.split(".")[0]
            assert module.startswith(allowed) or top in sys.stdlib_module_names, module


def test_starting_a_child_loads_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "import lockwatch.demo.children\n"
        "heavy = ('psycopg', 'textual', 'psutil', 'lockwatch.model', 'dataclasses', 'shutil')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    )
    assert out.stdout.strip() == "[]"
