"""What the config declares a path's locks to be ([[protocols]] in lockwatch.toml),
where their files cannot say it themselves (issue 42).

An empty file nobody holds a kernel lock on is a released kernel lock's sentinel
(filelock, portalocker, flock(1)) and an existence lock (npm's `lockfile`) alike,
byte for byte; a bare pid is a pid file and a sentinel portalocker wrote alike.
The operator knows which tool makes the files under a path and says so:

    [[protocols]]
    path = "/srv/app/locks/*.lock"   # a glob (fnmatch) on the lock file's absolute path
    kind = "kernel"                  # kernel locks' sentinels: free once nobody holds one

    [[protocols]]
    path = "~/project/node_modules/.locks/*"
    kind = "existence"               # held while the file exists (and its pid, if any, lives)

The first entry whose glob matches decides; only the locks whose reading is
open (`StalenessPolicy.sentinel_unproven`) change: a format's own rules stay.
"""

from __future__ import annotations

import os
import re
from typing import Any

from lockwatch.model.lock import Lock
from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.files.facts import facts_of, refiled
from lockwatch.sources.files.policy import PROTOCOLS, declare


@lean_dataclass(frozen=True, slots=True)
class Declared:
    """One [[protocols]] entry: the glob as written (expanded) and its protocol."""

    path: str
    kind: str
    pattern: re.Pattern[str]


@lean_dataclass(frozen=True, slots=True)
class Protocols:
    """The config's [[protocols]] entries, in order."""

    entries: tuple[Declared, ...] = ()

    def kind_of(self, path: str) -> str | None:
        """The protocol declared for the lock file at `path` (as listed, or as its
        real path: the dashboard lists a root named through a symlink where it
        really is), or None."""
        if not self.entries:
            return None
        names = {os.path.abspath(path)}
        names.add(os.path.realpath(path))
        for entry in self.entries:
            if any(entry.pattern.fullmatch(name) for name in names):
                return entry.kind
        return None

    def declared(self, lock: Lock) -> Lock:
        """`lock` with its path's declared protocol in its policy, where it has one
        and its reading is open."""
        if not self.entries or not facts_of(lock).policy.sentinel_unproven or lock.path is None:
            return lock
        kind = self.kind_of(lock.path)
        if kind is None:
            return lock
        policy = declare(facts_of(lock).policy, kind)
        return lock if policy is facts_of(lock).policy else refiled(lock, {"policy": policy})


NO_PROTOCOLS = Protocols()


def read_protocols(value: Any, where: str) -> Protocols:
    """The [[protocols]] entries (ConfigError naming the entry and the key)."""
    import fnmatch  # only with a config that has the table

    from lockwatch.config import ConfigError

    if value is None:
        return NO_PROTOCOLS
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise ConfigError(f"{where}: protocols must be [[protocols]] entries")
    entries = []
    for number, entry in enumerate(value, 1):
        at = f"{where}: protocols entry {number}"
        unknown = sorted(set(entry) - {"path", "kind"})
        if unknown:
            raise ConfigError(f"{at}: unknown key {unknown[0]!r}")
        path, kind = entry.get("path"), entry.get("kind")
        if not isinstance(path, str) or not path.strip():
            raise ConfigError(f"{at}: `path` must be a path or glob")
        expanded = os.path.expanduser(path)
        if not os.path.isabs(expanded):
            raise ConfigError(f"{at}: path {path!r} must be absolute (or start with ~)")
        if kind not in PROTOCOLS:
            raise ConfigError(f"{at}: kind must be {' or '.join(map(repr, PROTOCOLS))}")
        pattern = re.compile(fnmatch.translate(os.path.normpath(expanded)))
        entries.append(Declared(expanded, kind, pattern))
    return Protocols(tuple(entries))
