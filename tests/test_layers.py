"""The layer rules as tests: the model stays pure, sources never decide verdicts."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lockwatch"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_model_imports_nothing_with_side_effects() -> None:
    banned = (
        "textual",
        "psycopg",
        "inotify_simple",
        "psutil",
        "lockwatch.sources",
        "lockwatch.cli",
    )
    for path in (PACKAGE / "model").rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(banned), f"{path.name} imports {name}"
        source = path.read_text()
        assert "open(" not in source and "os." not in source, f"{path.name} does I/O"


def test_sources_do_not_import_ui_or_cli() -> None:
    for path in (PACKAGE / "sources").rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(("textual", "lockwatch.cli", "lockwatch.ui")), (
                f"{path} imports {name}"
            )


def test_importing_core_packages_loads_no_textual() -> None:
    code = (
        "import sys\n"
        "import lockwatch, lockwatch.model, lockwatch.model.assess, lockwatch.model.report\n"
        "import lockwatch.sources.files.scanner, lockwatch.sources.processes\n"
        "print(sorted(m for m in ('textual', 'psycopg', 'inotify_simple') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_ui_touches_no_files_or_sockets() -> None:
    """Widgets render from the model; collection and I/O live in sources and actions.
    Only the theme loader reads files: theme data at start, like configuration."""
    banned = ("psycopg", "inotify_simple", "psutil", "socket", "lockwatch.sources.files.scanner")
    for path in (PACKAGE / "ui").rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(banned), f"{path.name} imports {name}"
        if path.name == "themes.py":
            continue
        source = path.read_text()
        assert "open(" not in source and "os." not in source, f"{path.name} does I/O"


def test_actions_do_not_import_ui() -> None:
    for path in (PACKAGE / "actions").rglob("*.py"):
        for name in imported_modules(path):
            assert not name.startswith(("textual", "lockwatch.ui", "lockwatch.cli")), (
                f"{path} imports {name}"
            )
