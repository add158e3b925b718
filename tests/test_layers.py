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


# --- the shape: no import circles, imports run down, facts stay with their source ---

ROOT = PACKAGE.parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(name: str) -> set[str]:
    """The lockwatch modules `name` imports when it runs: at the top or inside
    functions alike, but not under `if TYPE_CHECKING:` (typing only). `from a
    import b` is an import of module a.b when there is one, else of a."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for otherwise in node.orelse:
                visit(otherwise)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in MODULES else module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {module for module in found if module in MODULES and module != name}


def import_cycles() -> list[list[str]]:
    """Every import circle among lockwatch's modules: the strongly connected
    components (Tarjan) of the runtime import graph with more than one module."""
    graph = {name: sorted(runtime_imports(name)) for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    # Deep enough for the graph, and put back: other tests in this worker
    # (the codec's nesting limits) count on the interpreter's own limit.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for name in sorted(graph):
            if name not in index:
                connect(name)
    finally:
        sys.setrecursionlimit(limit)
    return cycles


def test_no_import_circles() -> None:
    """No import runs back up: a circle (config -> registry -> every source ->
    config) makes every module in it load with all the others, and breaks on the
    first top-level import among them. Typing-only imports do not count."""
    assert import_cycles() == []


# Which layers a layer must never import (its own and those below are fine).
FORBIDDEN = {
    "lockwatch.model": ("sources", "actions", "ui", "cli", "serve"),
    "lockwatch.sources": ("actions", "ui", "cli", "serve"),
    "lockwatch.actions": ("ui", "cli"),
    # The history records any source's locks through the generic model (and the
    # generic sources-layer modules: the recording codec's types, URL scrubbing);
    # the CLI, the dashboard and serve import it, never the other way round.
    "lockwatch.history": ("actions", "ui", "cli", "serve"),
}


def test_imports_run_down_the_layers() -> None:
    wrong: list[str] = []
    for name in sorted(MODULES):
        for layer, banned in FORBIDDEN.items():
            if name != layer and not name.startswith(layer + "."):
                continue
            heads = tuple(f"lockwatch.{above}" for above in banned)
            wrong.extend(
                f"{name} imports {imported}"
                for imported in sorted(runtime_imports(name))
                if imported.startswith(heads)
            )
    assert wrong == []


# A source's facts are read through `lock.facts` (model/facts.py), never through
# the per-family fields; a source's name is the registry's, never a literal.
FAMILY_FIELDS = frozenset({"pg", "store", "kernel", "remote"})


def facts_read_outside_sources(path: Path) -> list[str]:
    """Where `path` reads an attribute named like a source family's fields, or
    compares something's `.source` with a string literal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in FAMILY_FIELDS:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            reads_source = any(
                isinstance(side, ast.Attribute) and side.attr == "source" for side in sides
            )
            literal = any(
                isinstance(side, ast.Constant) and isinstance(side.value, str) for side in sides
            ) or any(
                isinstance(side, ast.Tuple | ast.List | ast.Set)
                and any(isinstance(item, ast.Constant) for item in side.elts)
                for side in sides
            )
            if reads_source and literal:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .source == literal")
    return found


def test_no_source_facts_read_outside_sources() -> None:
    """Generic code asks the facts (`lock.facts.…`) and the registry: nothing
    outside lockwatch/sources/ reads `.pg`, `.store`, `.kernel`, `.remote` or
    tells a source by comparing its name with a literal."""
    sources = PACKAGE / "sources"
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if sources not in path.parents:
            wrong.extend(facts_read_outside_sources(path))
    assert wrong == []
