"""What each one-shot command imports (issue 42): `ls DIR`, `ls --pg` and `why`
load only the modules they use. Start-up was most of `ls`'s time, and every
source's package, the actions, Textual and the drivers of sources not asked for
were loaded by every run; a module added to one of these paths makes its test
fail, and is either needed (add it to the list here) or imported where it is
used. The real console script (`lockwatch.cli.main`) runs in a fresh
interpreter; what it has loaded is read as it leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Runs the console script with ARGS, writing the names of the modules loaded at
# its end to OUT: at os._exit (the console script's fast exit) or at exit.
_PROBE = r"""
import atexit, json, os, sys
out, args = sys.argv[1], sys.argv[2:]
def dump():
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
real_exit = os._exit
def leave(code):
    dump()
    real_exit(code)
os._exit = leave
atexit.register(dump)
sys.argv = ["lockwatch", *args]
from lockwatch.cli import main
main()
"""


def loaded(tmp_path: Path, *args: str) -> tuple[list[str], list[str]]:
    """The lockwatch modules and the third-party top-level packages `lockwatch
    ARGS` loads, with config, state and PostgreSQL settings of its own (none)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PG", "LOCKWATCH_", "XDG_"))
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".state"),
    )
    out = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    modules: list[str] = json.loads(out.read_text())
    ours = sorted(m for m in modules if m == "lockwatch" or m.startswith("lockwatch."))
    stdlib = sys.stdlib_module_names
    others = sorted(
        {m.split(".")[0] for m in modules}
        - {name for name in {m.split(".")[0] for m in modules} if name in stdlib}
        - {"lockwatch", "__main__", "cython_runtime"}
        - {m for m in {n.split(".")[0] for n in modules} if m.startswith("_")}
    )
    return ours, others


def declarations() -> frozenset[str]:
    """Each lazy registry entry's package, its declared.py and the modules of its
    own package that declared.py imports: every start loads them (sources/lazy.py),
    so a new source's entry brings them here without a line of this file."""
    import ast
    import importlib.util

    from lockwatch.sources.lazy import LazySource
    from lockwatch.sources.registry import SOURCES

    found: set[str] = set()
    for source in SOURCES:
        if not isinstance(source, LazySource):
            continue
        package = source.package
        found |= {package, f"{package}.declared"}
        spec = importlib.util.find_spec(f"{package}.declared")
        assert spec is not None and spec.origin is not None, package
        # Its top-level imports: those inside functions run when asked, not at start.
        for node in ast.parse(Path(spec.origin).read_text()).body:
            if not isinstance(node, ast.ImportFrom):
                continue
            module = package if node.level else node.module or ""
            if node.level and node.module:
                module = f"{package}.{node.module}"
            if module != package and not module.startswith(f"{package}."):
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                place = Path(spec.origin).parent.joinpath(*sub.split(".")[3:])
                is_module = place.with_suffix(".py").exists() or (place / "__init__.py").exists()
                found.add(sub if is_module else module)
    return frozenset(name.removeprefix("lockwatch.") for name in found)


# Every command's start: the console script, the config, the registry with every
# source's declaration (`ls` and the dashboard take every source's options: its
# declared.py) and the files plugin, and the model those name. Not the plugin of a
# source the run does not use (sources/lazy.py), nor a collection, actions or drivers.
STARTUP = frozenset(
    {
        "cli",
        "cli.ending",
        "cli.where",
        "clock",
        "config",
        "model",
        "model.compact",
        "model.facts",
        "model.holder",
        "model.humanize",
        "model.jsonfields",
        "model.lazyre",
        "model.lock",
        "model.process",
        "model.slots",
        "model.status",
        "model.text",
        "model.timestamps",
        "model.verdict",
        "sources",
        "sources.contract",
        "sources.declaring",
        "sources.etcd",
        "sources.etcd.declared",
        "sources.kernel.declared",
        "sources.lazy",
        "sources.named",
        "sources.mysql.declared",
        "sources.postgres.declared",
        "sources.redis.declared",
        "sources.remote.declared",
        "sources.etcd.ids",
        "sources.files",
        "sources.files.ids",
        "sources.files.plugin",
        "sources.kernel",
        "sources.kernel.ids",
        "sources.mysql",
        "sources.postgres",
        "sources.postgres.dsn",
        "sources.postgres.ids",
        "sources.redis",
        "sources.redis.ids",
        "sources.registry",
        "sources.remote",
        "sources.remote.ids",
        "sources.secrets",
        "sources.stores",
        "sources.stores.ids",
        "sources.zookeeper",
        "sources.zookeeper.declared",
        "sources.zookeeper.ids",
        "trusted",
        "model.clues",
        "model.hosts",
    }
)
# Each registry entry's declaration, from the registry: a new source needs no line here.
STARTUP |= declarations()

# Every lock format's decoder: `ls DIR` and `why` read files with them all, and
# the lock file's facts they build (its rules, its policy, the kernel's word).
DECODERS = frozenset(
    {
        "sources.filelocks",
        "sources.files.facts",
        "sources.files.holder",
        "sources.files.policy",
        "sources.files.rules",
        "sources.files.decoders",
        "sources.files.decoders.base",
        "sources.files.decoders.cargo",
        "sources.files.decoders.clawdbot",
        "sources.files.decoders.clawdbot_gateway",
        "sources.files.decoders.clawdbot_session",
        "sources.files.decoders.dispatch",
        "sources.files.decoders.dpkg",
        "sources.files.decoders.emacs",
        "sources.files.decoders.flufl",
        "sources.files.decoders.generic",
        "sources.files.decoders.git",
        "sources.files.decoders.gitclaw",
        "sources.files.decoders.hooks",
        "sources.files.decoders.kernel_file",
        "sources.files.decoders.leveldb",
        "sources.files.decoders.liblockfile",
        "sources.files.decoders.libreoffice",
        "sources.files.decoders.little_loops",
        "sources.files.decoders.lockdir",
        "sources.files.decoders.loops_queue",
        "sources.files.decoders.mercurial",
        "sources.files.decoders.pacman",
        "sources.files.decoders.procmail",
        "sources.files.decoders.pylockfile",
        "sources.files.decoders.rpm",
        "sources.files.decoders.softfilelock",
        "sources.files.decoders.sqlite",
        "sources.files.decoders.terraform",
        "sources.files.decoders.tower_fleet",
        "sources.files.decoders.vim_swap",
        "sources.files.decoders.zc_lockfile",
    }
)

# `ls DIR`: the file scan, every format's decoder, the kernel's word on each file.
# The forking machinery (fanout) only when the tree is split among workers (cpus.spread).
LS_OWN = DECODERS | frozenset(
    {
        "cli.ls",
        "collector",
        "cpus",
        "model.conflicts",
        "model.handover",
        "model.report",
        "sources.files.evidence",
        "sources.files.kernel_found",
        "sources.files.listing",
        "sources.files.protocols",
        "sources.mounts",
        "sources.files.scanner",
        "sources.files.tombstones",
        "sources.files.users",
        "sources.holders",
        "sources.procfs",
        "sources.processes",
    }
)

# `ls --pg DSN` (tests/postgres/test_start_imports_pg.py): the PostgreSQL listing.
LS_PG_OWN = frozenset(
    {
        "sources.postgres.plugin",
        "sources.postgres.settings",
        "sources.servers",
        "sources.locktables",
        "sources.locktables.config",
        "cli.ls",
        "collector",
        "cpus",
        "model.blocking",
        "model.held",
        "model.report",
        "sources.deadline",
        "sources.locktables.facts",
        "sources.locktables.rows",
        "sources.locktables.work",
        "sources.clients",
        "sources.postgres.clients",
        "sources.postgres.display",
        "sources.postgres.facts",
        "sources.postgres.held",
        "sources.postgres.idlerows",
        "sources.postgres.listing",
        "sources.postgres.locktables",
        "sources.postgres.query",
        "sources.postgres.records",
        "sources.postgres.report",
        "sources.postgres.rowread",
        "sources.postgres.rules",
        "sources.postgres.source",
        "sources.postgres.terms",
        # The database rules' words about a session's client (postgres.rules').
        "sources.sessions",
    }
)

# `why TEXT`: each source's messages, and the file it names looked at.
WHY_OWN = DECODERS | frozenset(
    {
        "cli.table",
        "cli.why",
        "cli.why_args",
        "cli.why_look",
        "model.clues",
        "model.columns",
        "model.events",
        "model.handover",
        "sources.files.kernel_found",
        "sources.files.messages",
        "sources.mounts",
        "sources.files.scanner",
        "sources.files.tombstones",
        "sources.k8s.messages",
        "sources.mysql.messages",
        "sources.postgres.messages",
        "sources.zookeeper.messages",
    }
)

# Third-party top-level packages. Never Textual, rich, httpx, redis, pymysql,
# etcd's client or prometheus_client: none of these commands uses them.
LS_PACKAGES = ["click", "orjson", "platformdirs"]
LS_PG_PACKAGES = [
    "click",
    "orjson",
    "platformdirs",
    "psycopg",
    "psycopg_binary",
    "typing_extensions",
]
WHY_PACKAGES = ["click", "orjson", "platformdirs"]


def named(*groups: frozenset[str]) -> list[str]:
    return sorted({"lockwatch", *(f"lockwatch.{m}" for group in groups for m in group)})


def unlisted_and_missing(ours: list[str], expected: list[str]) -> tuple[list[str], list[str]]:
    """The modules loaded that the list lacks, and those listed but not loaded."""
    return sorted(set(ours) - set(expected)), sorted(set(expected) - set(ours))


def test_ls_of_a_directory_imports_the_scan_and_nothing_else(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "app.lock").write_text("4000000\n")
    ours, others = loaded(tmp_path, "ls", "--json", str(locks))
    assert unlisted_and_missing(ours, named(STARTUP, LS_OWN)) == ([], [])
    assert others == LS_PACKAGES


def test_why_imports_the_messages_and_nothing_else(tmp_path: Path) -> None:
    message = f"fatal: Unable to create '{tmp_path}/repo/.git/index.lock': File exists."
    ours, others = loaded(tmp_path, "why", message)
    assert unlisted_and_missing(ours, named(STARTUP, WHY_OWN)) == ([], [])
    assert others == WHY_PACKAGES


def test_help_lists_every_source_without_loading_their_plugins(tmp_path: Path) -> None:
    """`--help` and an action command's list every source (registry.help_rows)
    and take every source's action options from its declared.py: no source's
    plugin is loaded for it but the files' (every start's)."""
    for args in (("--help",), ("break", "--help")):
        ours, _ = loaded(tmp_path, *args)
        plugins = [m for m in ours if m.endswith(".plugin")]
        assert plugins == ["lockwatch.sources.files.plugin"], (args, plugins)
