"""What the server sources' plugins (postgres, mysql, redis, etcd, zookeeper, k8s) have in
common, as defaults a new one inherits: it writes only what differs (its
declaration's base is `declaring.ServerDeclared`).

- `ServerPlugin`, the base of its plugin's source: its package's
  `actions.ACTIONS`, the empty dashboard's hint of a server listening on this
  host (`listens`), the refresh
  and idle-after values of a selection, and `polled_once` for `find`.

Loaded with a server source's plugin, never at the CLI's start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict
    from lockwatch.sources.contract import ActionProvider, Found, Hint, Wanted
    from lockwatch.sources.polled import Polled

    class Poller(Protocol):
        """A server's poller, or the server itself (MySQL's): polled once, closed."""

        def poll(self) -> Polled: ...

        def close(self) -> None: ...


# Seconds between polls of a server, unless --refresh says otherwise.
DEFAULT_REFRESH = 2.0


class Listens(NamedTuple):
    """How an empty dashboard tells of a server of its kind on this host."""

    server: str  # "a PostgreSQL server"
    port: int
    sockets: tuple[str, ...]  # where a local server's socket is by default
    watch: str  # the flag that would show its locks, in words


class ServerPlugin:
    """Defaults for a server source's plugin (`contract.Source`)."""

    listens: Listens | None = None
    # The module of its package whose `ACTIONS` are its actions (`tableactions`:
    # a database server's, with its lock tables' rows' breaks in front).
    actions_module = "actions"

    @property
    def actions(self) -> ActionProvider:
        """Its package's `actions_module.ACTIONS`: loaded when an action is
        planned, not when the CLI starts."""
        import importlib

        package = type(self).__module__.rpartition(".")[0]
        module = importlib.import_module(f"{package}.{self.actions_module}")
        provider: ActionProvider = module.ACTIONS
        return provider

    def read_config(self, tables: Mapping[str, Any], where: str) -> Any:
        """Its settings: its package's `settings.read_settings` of the config's
        tables (ConfigError where they are wrong)."""
        import importlib

        package = type(self).__module__.rpartition(".")[0]
        return importlib.import_module(f"{package}.settings").read_settings(tables, where)

    def hint(self, wanted: Wanted, running: bool) -> Hint | None:
        """Not watching any: a server on this host, seen by its port or socket
        (nothing connects), and the flag that would watch it."""
        if running or self.listens is None:
            return None
        from lockwatch.sources.listening import server_hint

        listens = self.listens
        return server_hint(listens.server, listens.port, listens.sockets, listens.watch)


def config_table(data: Mapping[str, Any], name: str, where: str) -> Mapping[str, Any]:
    """Its config table `[name]` (empty when the file has none); ConfigError
    when it is not a table."""
    table = data.get(name, {})
    if not isinstance(table, dict):
        from lockwatch.config import ConfigError

        raise ConfigError(f"{where}: [{name}] must be a table")
    return table


def config_strings(value: Any, what: str, where: str) -> tuple[str, ...]:
    """A config value that is a string or a list of strings, as a tuple
    (ConfigError naming `what` at `where` when it is neither)."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        from lockwatch.config import ConfigError

        raise ConfigError(f"{where}: {what} must be a string or a list of strings")
    return tuple(values)


def config_seconds(
    table: Mapping[str, Any], key: str, default: float, what: str, where: str, *, zero: bool = True
) -> float:
    """A config value that is a finite number of seconds (`table[key]`, else
    `default`), as a float: >= 0, or > 0 when `zero` is False (ConfigError naming
    `what` at `where` otherwise; a bool is no number, though Python counts it one)."""
    value = table.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or (value < 0 if zero else value <= 0)
    ):
        from lockwatch.config import ConfigError

        raise ConfigError(f"{where}: {what} must be a number of seconds {'>=' if zero else '>'} 0")
    return float(value)


def refresh(wanted: Wanted) -> float:
    """Seconds between polls: --refresh, else the default."""
    return float(wanted.values.get("refresh") or DEFAULT_REFRESH)


def idle_after(wanted: Wanted, name: str, default: float) -> float:
    """Seconds idle in a transaction before a holder is stale: the option `name`
    (`pg_idle_after`), else `default` (the config's); a nan or infinity is refused."""
    from lockwatch.sources.contract import SourceError

    given = wanted.values.get(name)
    if given is None:
        return default
    if not math.isfinite(given):
        flag = "--" + name.replace("_", "-")
        raise SourceError(f"{flag}: must be a finite number of seconds")
    return float(given)


def polled_once(poller: Poller, server: str) -> list[Lock]:
    """One poll of one server, for `find`: its locks, or LookupFailed saying why
    there are none (`server`: how the message names it)."""
    from lockwatch.sources.contract import LookupFailed

    try:
        polled = poller.poll()
    finally:
        poller.close()
    if polled.locks is None:
        reasons = "; ".join(f"{s.name}: {s.reason}" for s in polled.statuses)
        raise LookupFailed(f"cannot read {server}: {reasons or 'no answer'}")
    return polled.locks


def found_in(locks: list[Lock], target: str, host: str) -> Found | None:
    """The lock `target` names among one poll's `locks`, judged now, for `find`
    (None: it is not among them)."""
    from lockwatch.clock import SystemClock
    from lockwatch.model.process import StaticProcesses
    from lockwatch.model.verdict import evaluate

    for lock in locks:
        if lock.id == target:
            return lock, evaluate(lock, StaticProcesses(), SystemClock(), host), locks
    return None


def naming(lock: Lock, verdict: Verdict) -> tuple[bool, str | None]:
    """Whether ending a lock's holder (its connection, its backend) needs the
    lock's typed name, and why when that is not plain: a lock stale by idle time
    alone, its client unseen, is as deliberate as an active one."""
    from lockwatch.model.verdict import State

    stale = verdict.state is State.STALE
    inferred = stale and "inferred" in verdict.codes
    why = (
        f"{lock.name} is stale only by inference (idle time; lockwatch could not find its"
        " client process, which may still be at work)"
        if inferred
        else None
    )
    return not stale or inferred, why
