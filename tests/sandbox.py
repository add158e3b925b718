"""The runner's own lockwatch files stay out of the tests' reach (issue 42, item 6).

`enter()`, called by the top-level conftest before anything computes a
platformdirs path, points HOME and every XDG_* directory at one temporary
directory for the session. Environment variables carry it to every subprocess
the tests start and to the pytest-xdist workers (they inherit the controller's
environment, and find the sandbox already made).

Before the override it records where lockwatch would keep the runner's own
config, state, cache, data and runtime files (`runner_dirs`); `fingerprint`
reads them (existence, and each entry's size and mtime) so that the conftest
can fail a test, and the session, that changed them.

Tools that cache downloads under HOME (npm, pip, the clawdbot package these
tests fetch) keep one fixed cache outside the sandbox and outside lockwatch's
directories, so a sandboxed session neither downloads them again nor needs the
network to.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Mapping, MutableMapping
from pathlib import Path

APP = "lockwatch"
# The sandbox's root, and the runner's own lockwatch directories (JSON), for the
# xdist workers and for tests that check the isolation itself.
SANDBOX_VAR = "LOCKWATCH_TESTS_SANDBOX"
RUNNER_DIRS_VAR = "LOCKWATCH_TESTS_RUNNER_DIRS"
# A fixed cache for what the tests download once a machine (the clawdbot package).
TOOL_CACHE_VAR = "LOCKWATCH_TESTS_CACHE"
# The XDG directories, each a directory of the sandbox's HOME.
XDG_DIRS = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_STATE_HOME": ".local/state",
    "XDG_DATA_HOME": ".local/share",
    "XDG_CACHE_HOME": ".cache",
    "XDG_RUNTIME_DIR": "run",
}

# One entry of a directory tree: its path relative to the tree, size and mtime (ns).
Entry = tuple[str, int, int]


def runner_dirs() -> dict[str, str]:
    """Where lockwatch, run by this user in this environment, keeps its files:
    platformdirs' answers, read from the current (real) environment."""
    import platformdirs

    with warnings.catch_warnings():  # an unset XDG_RUNTIME_DIR warns, then falls back
        warnings.simplefilter("ignore")
        return {
            "config": platformdirs.user_config_dir(APP),
            "state": platformdirs.user_state_dir(APP),
            "cache": platformdirs.user_cache_dir(APP),
            "data": platformdirs.user_data_dir(APP),
            "runtime": platformdirs.user_runtime_dir(APP),
        }


def enter(environ: MutableMapping[str, str]) -> Path:
    """Point `environ`'s HOME and XDG_* directories into the session's sandbox
    (made here, or found there when a parent process made it) and return its root."""
    given = environ.get(SANDBOX_VAR)
    if given:
        return Path(given)
    real_home = Path(environ.get("HOME") or Path.home())
    real_cache = Path(environ.get("XDG_CACHE_HOME") or real_home / ".cache")
    environ[RUNNER_DIRS_VAR] = json.dumps(runner_dirs())
    # Downloads kept once a machine, where they were kept before the sandbox.
    environ.setdefault("npm_config_cache", str(real_home / ".npm"))
    environ.setdefault("PIP_CACHE_DIR", str(real_cache / "pip"))
    environ.setdefault(TOOL_CACHE_VAR, str(real_cache / "lockwatch-tests"))
    # Toolchains found through HOME: rustup's cargo proxy picks its toolchain from
    # RUSTUP_HOME (~/.rustup), and fails with "no default is configured" without it.
    if (real_home / ".rustup").is_dir():
        environ.setdefault("RUSTUP_HOME", str(real_home / ".rustup"))
    root = Path(tempfile.mkdtemp(prefix="lockwatch-tests-home-"))
    home = root / "home"
    for relative in XDG_DIRS.values():
        # 0700: XDG_RUNTIME_DIR must be (platformdirs passes over another), the rest alike.
        (home / relative).mkdir(mode=0o700, parents=True)
    environ["HOME"] = str(home)
    for name, relative in XDG_DIRS.items():
        environ[name] = str(home / relative)
    environ[SANDBOX_VAR] = str(root)
    return root


def runner_dirs_of(environ: Mapping[str, str]) -> dict[str, str]:
    """The runner's own lockwatch directories that `enter` recorded."""
    recorded: dict[str, str] = json.loads(environ[RUNNER_DIRS_VAR])
    return recorded


def tool_cache() -> Path:
    """The fixed cache for what tests download once a machine (not lockwatch's)."""
    given = os.environ.get(TOOL_CACHE_VAR)
    return Path(given) if given else Path.home() / ".cache" / "lockwatch-tests"


def fingerprint(directories: Mapping[str, str]) -> dict[str, list[Entry] | None]:
    """Each directory's entries (None: it does not exist), to compare before and after."""
    return {name: _tree(Path(path)) for name, path in directories.items()}


def _tree(top: Path) -> list[Entry] | None:
    try:
        info = top.stat()
    except FileNotFoundError:
        return None
    entries: list[Entry] = [(".", info.st_size, info.st_mtime_ns)]
    for directory, subdirs, files in os.walk(top):
        for name in sorted(subdirs + files):
            path = Path(directory, name)
            try:
                info = path.lstat()
            except FileNotFoundError:  # removed while walked: a change the next look sees
                continue
            entries.append((str(path.relative_to(top)), info.st_size, info.st_mtime_ns))
    return sorted(entries)


def changes(
    directories: Mapping[str, str],
    before: Mapping[str, list[Entry] | None],
    after: Mapping[str, list[Entry] | None],
) -> list[str]:
    """One line per directory whose fingerprint changed, naming what changed."""
    lines: list[str] = []
    for name, path in directories.items():
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if old is None or new is None:
            lines.append(f"{path} was {'created' if old is None else 'removed'}")
            continue
        differ = sorted({e[0] for e in set(old) ^ set(new)})
        lines.append(f"{path}: {', '.join(differ[:5])} changed")
    return lines
