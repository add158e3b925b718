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
    wrong: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if sources not in path.parents:
            wrong.extend(facts_read_outside_sources(path))
    assert wrong == []


# --- the size: functions in named steps, modules that fit in a head ---

FUNCTION_LINES = 80
MODULE_LINES = 600
# The codec (`--record`/`replay`'s format) is one cohesive table of encoders and
# decoders, over 600 lines since issue 43 counted; its split is its own work.
LONG_MODULES = frozenset({"model/codec.py"})


def test_no_function_is_longer_than_80_lines() -> None:
    """Every function's own span (def line to last line, decorators not counted)
    is at most 80 lines. A nested function is measured as its own function, and
    its lines count in its enclosing function's span too: an outer function that
    grows by holding long closures fails like any other. Long work is named steps."""
    long: list[str] = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} {lines}")
    assert not long, f"functions over {FUNCTION_LINES} lines: {sorted(long)}"


def test_no_module_is_longer_than_600_lines() -> None:
    """A module over 600 lines splits into cohesive modules of its package."""
    long = [
        f"{path.relative_to(PACKAGE)} {count}"
        for path in PACKAGE.rglob("*.py")
        if (count := len(path.read_text().splitlines())) > MODULE_LINES
        and str(path.relative_to(PACKAGE)) not in LONG_MODULES
    ]
    assert not long, f"modules over {MODULE_LINES} lines: {sorted(long)}"


# --- the generic Lock: what every source has ----------------------------------------

MAX_LOCK_FIELDS = 16


def test_lock_holds_only_what_every_source_has() -> None:
    """A source's own fields live in its facts (`Lock.facts`): a lock file's policy
    and the kernel's word on it are the file source's, never the generic Lock's."""
    from dataclasses import fields

    from lockwatch.model.lock import Lock

    names = [f.name for f in fields(Lock)]
    assert len(names) <= MAX_LOCK_FIELDS, names


def _source_names() -> set[str]:
    from lockwatch.sources import registry

    return {source.name for source in registry.SOURCES} | {
        source.id_prefix for source in registry.SOURCES
    }


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_no_model_module_is_a_sources() -> None:
    """No module of `lockwatch/model/` is one source's: none is named after a
    source (the kernel's types live below the sources that share them), and
    none names one in its code (a string equal to a source's name or id prefix,
    docstrings aside)."""
    names = _source_names()
    wrong = []
    for path in sorted((PACKAGE / "model").rglob("*.py")):
        if path.stem in names:
            wrong.append(f"{path.relative_to(ROOT)}: named after a source")
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        wrong.extend(
            f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in names
            and id(node) not in docs
        )
    assert wrong == []


# --- sources keep to themselves -----------------------------------------------------
#
# A source package is a package under lockwatch/sources/ with a `plugin.py` (the
# registry's entries: files, postgres, kernel, ...). Everything else there is shared
# by the sources and below them: the generic modules (registry, contract, lazy, feed,
# polled, processes, ...) and the shared packages with no plugin of their own (stores:
# what Redis and etcd locks have in common; locktables; servers: the server sources'
# base). Generic code asks a lock's facts and the registry; a source asks nothing of
# another source.

SOURCES_DIR = PACKAGE / "sources"
SOURCE_PACKAGES = frozenset(
    path.parent.name for path in SOURCES_DIR.glob("*/plugin.py") if path.parent.is_dir()
)
# The demo plays real tools' parts (a PostgreSQL server's advisory locks, named as
# the postgres source names them) for the dashboard to watch: a producer, as the
# tests are, not a layer that reads locks.
PRODUCERS = (PACKAGE / "demo",)


def source_package_of(module: str) -> str | None:
    """The source package `module` is in or names (`lockwatch.sources.redis.ids`:
    redis), or None."""
    parts = module.split(".")
    if parts[:2] != ["lockwatch", "sources"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in SOURCE_PACKAGES else None


def named_modules(path: Path) -> set[str]:
    """What `path` imports, typing-only imports too, each `from a import b` as
    both a and a.b (`from lockwatch.sources import redis` names the package)."""
    names = imported_modules(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_source_packages_are_found() -> None:
    assert {"files", "kernel", "postgres", "mysql", "redis", "etcd", "remote"} <= SOURCE_PACKAGES
    assert not {"stores", "locktables"} & SOURCE_PACKAGES


def test_nothing_outside_sources_imports_a_source() -> None:
    """actions, cli, serve, ui and model ask the registry and the contract
    (sources/registry.py, sources/contract.py), never one source's package."""
    wrong: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if SOURCES_DIR in path.parents or any(where in path.parents for where in PRODUCERS):
            continue
        wrong.extend(
            f"{path.relative_to(ROOT)} imports {name}"
            for name in sorted(named_modules(path))
            if source_package_of(name) is not None
        )
    assert wrong == []


# Pairs of sources one still imports the other: none. A lock file's row whose
# kernel lock is held is broken as the kernel's break: files/actions.py is handed
# the kernel's actions by the front end (`Asked.providers`; what it asks of them:
# sources/filelocks.HoldActions), never by import; the kernel ids and signal
# choices both use live in sources/filelocks.py. Only ever empty.
STILL_REACHING: frozenset[tuple[str, str]] = frozenset()


def test_no_source_imports_another() -> None:
    """What two sources both need lives below both (a shared module or package
    of sources/), so each can be read, changed and left out on its own."""
    wrong: list[str] = []
    reaching: set[tuple[str, str]] = set()
    for path in sorted(SOURCES_DIR.rglob("*.py")):
        own = source_package_of(_module_name(path))
        if own is None:
            continue
        for name in sorted(named_modules(path)):
            other = source_package_of(name)
            if other in (None, own):
                continue
            assert other is not None
            reaching.add((own, other))
            if (own, other) not in STILL_REACHING:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert wrong == []
    assert reaching == STILL_REACHING, "untangled: take it off STILL_REACHING"
