"""The mysql source: MySQL and MariaDB named locks (GET_LOCK), InnoDB row-lock
waits and metadata-lock queues, from the servers --mysql names (else the config).

Config table it owns:

    [mysql]
    dsn = ["mysql://monitor@db1:3306/app"]  # a string or a list; or a socket's path
    idle_after = 60        # seconds idle (in a transaction) before holders are stale
    named_locks = ["nightly-reindex"]  # GET_LOCK names to ask IS_USED_LOCK about
                           # (MariaDB without the metadata_lock_info plugin)
    password_file = "~/.config/lockwatch/mysql.password"  # for DSNs without one
    option_file = "~/.my.cnf"  # its [client] password (the default where it exists)

It reads [[locktables]] too (sources/locktables/config.py; PostgreSQL's source owns
it): a configured table is looked for in every database, `schema` being the database.

PyMySQL is imported only when a server is polled or acted on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from lockwatch.sources.contract import (
    Found,
    Selected,
    SourceError,
    Wanted,
)
from lockwatch.sources.mysql.declared import DEFAULT_IDLE_AFTER, MysqlDeclared
from lockwatch.sources.mysql.settings import (
    DEFAULTS,
    MySettings,
    resolve,
)
from lockwatch.sources.selection import StoreSelection
from lockwatch.sources.servers import (
    DEFAULT_REFRESH,
    Listens,
    ServerPlugin,
    found_in,
    idle_after,
    polled_once,
    refresh,
)

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.locktables.config import TableSpec
    from lockwatch.sources.mysql.dsn import Endpoint
    from lockwatch.sources.mysql.server import MyServer
    from lockwatch.sources.polled import PolledFeed


class MysqlSource(ServerPlugin, MysqlDeclared):
    listens = Listens(
        "a MySQL/MariaDB server",
        3306,
        # Where a local server's socket is by default (Debian's and the upstream builds').
        ("/run/mysqld/mysqld.sock", "/var/run/mysqld/mysqld.sock", "/tmp/mysql.sock"),
        "--mysql mysql://USER@127.0.0.1:3306 shows its locks",
    )
    actions_module = "tableactions"

    @property
    def record_types(self) -> tuple[type, ...]:
        # Its facts' types, for recordings: loaded when asked, not at the CLI's start.
        from lockwatch.sources.locktables.facts import TableLock
        from lockwatch.sources.mysql.facts import MyClient, MyLock, MySession

        return (MyLock, MySession, MyClient, TableLock)

    def select(self, wanted: Wanted) -> Selected | None:
        settings: MySettings = wanted.settings(self.name) or DEFAULTS
        idle = idle_after(wanted, "mysql_idle_after", settings.idle_after)
        endpoints = resolve(wanted, settings)
        if not endpoints:
            return None
        return SelectedMysql(
            endpoints,
            idle,
            tuple(wanted.values.get("mysql_locks") or ()) + settings.named_locks,
            refresh(wanted),
            settings.locktables,
        )

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return find_mysql(target, wanted, host)


@dataclass(frozen=True)
class SelectedMysql(StoreSelection):
    kind: ClassVar[str] = "mysql"
    endpoints: tuple[Endpoint, ...]
    idle_after: float = DEFAULT_IDLE_AFTER
    names: tuple[str, ...] = ()
    refresh: float = DEFAULT_REFRESH
    locktables: tuple[TableSpec, ...] = ()  # [[locktables]]

    def pollers(self, clock: Clock) -> list[MyServer]:
        from lockwatch.sources.mysql.server import MyServer

        return [
            MyServer(
                endpoint,
                clock=clock,
                idle_after=self.idle_after,
                names=self.names,
                locktables=self.locktables,
            )
            for endpoint in self.endpoints
        ]

    def feeds(self, clock: Clock, host: str) -> Sequence[PolledFeed]:
        from lockwatch.sources.mysql.feed import same_but_for_wobble
        from lockwatch.sources.polled import PolledFeed

        return [
            PolledFeed(poller, host=host, interval=self.refresh, settle=same_but_for_wobble)
            for poller in self.pollers(clock)
        ]


def find_mysql(target: str, wanted: Wanted, host: str) -> Found | str:
    """The MySQL lock `target` names, polled and judged now; or why there is none."""
    from lockwatch.sources.mysql.dsn import endpoint_for
    from lockwatch.sources.mysql.records import parse_id
    from lockwatch.sources.mysql.server import MyServer

    parsed = parse_id(target)
    if parsed is None:
        raise SourceError(f"{target!r} is not a MySQL lock id as `lockwatch ls --json` prints one")
    settings: MySettings = wanted.settings("mysql") or DEFAULTS
    known = resolve(wanted, settings)
    endpoint = next((e for e in known if e.name == parsed.server), None) or endpoint_for(
        parsed.server, wanted.environ, settings.password_file
    )
    if endpoint is None:
        raise SourceError(f"no MySQL server {parsed.server} among --mysql/config")
    names = tuple(wanted.values.get("mysql_locks") or ()) + settings.named_locks
    if parsed.kind == "get_lock" and parsed.target not in names:
        names += (parsed.target,)
    given = wanted.values.get("mysql_idle_after")
    server = MyServer(
        endpoint,
        idle_after=settings.idle_after if given is None else float(given),
        names=names,
        locktables=settings.locktables,
    )
    locks = polled_once(server, parsed.server)
    return found_in(locks, target, host) or (
        f"no lock {target} now: released, or its holder changed since it was listed"
        " (lock ids name the holder's thread)"
    )


SOURCE = MysqlSource()
