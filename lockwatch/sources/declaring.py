"""The bases of a source's declaration (its `declared.py` class, what every run
asks of it: sources/lazy.py), with the defaults a new source inherits, so that
each declaration states only what differs.

`Declaring`, every source's: its `label`, `id_prefix` and `title` are its `name`
and its `config_tables` its name's table unless it says otherwise; it recognises
in pasted text what its package's `messages` module does (when it has one); it
is asked for by the CLI values it names (`asking`) and may run when asked or
configured; it has no options unless it says.

`ServerDeclared`, a server source's: asked for by its servers' option too
(`target_option`), whose click option it makes for its listing (with
`servers_help`) and for the action commands (with `target_help`), and its
`--x-idle-after` option when it has an `idle_after`. Every run loads them: they
build nothing (a server plugin's base is servers.py, loaded with the plugin).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted
    from lockwatch.sources.secrets import InArguments


class TargetOption(NamedTuple):
    """The option naming a source's servers: its listing's (`ls`, the dashboard)
    and, with other help, the action commands' (the server a TARGET lives on)."""

    flag: str  # "--pg"
    dest: str  # "pg_dsns"
    # Its values may carry a password: hidden from `ps` (None: they never do).
    carries: InArguments | None
    metavar: str
    multiple: bool = True

    def option(self, help: str) -> Decorator:
        """The option, saying `help`."""
        if self.carries is None:
            import click

            return click.option(
                self.flag, self.dest, multiple=self.multiple, metavar=self.metavar, help=help
            )
        from lockwatch.sources.secrets import secret_option

        return secret_option(
            self.flag,
            self.dest,
            carries=self.carries,
            multiple=self.multiple,
            metavar=self.metavar,
            help=help,
        )


class Repeatable(tuple[str, str, str, str]):
    """A repeatable option of a source's listing that takes a value each time
    (`--zk-path PATH`): its flag, click parameter name, metavar and help. A
    plain tuple: a NamedTuple class costs every start some 0.8M instructions."""

    __slots__ = ()

    def __new__(cls, flag: str, dest: str, metavar: str, help: str) -> Repeatable:
        return super().__new__(cls, (flag, dest, metavar, help))

    def option(self) -> Decorator:
        flag, dest, metavar, help = self
        return TargetOption(flag, dest, None, metavar).option(help)


class Declaring:
    """Defaults for a source's declaration (`contract.Declared`)."""

    name: str
    summary: str
    # Its `name` unless the declaration says (set when the class is made).
    label: str
    id_prefix: str
    title: str
    # Its name's table of lockwatch.toml unless it says (set when the class is made).
    config_tables: tuple[str, ...]
    status_word = ""
    # Its servers' sessions wait on each other (contract.Source): None, none.
    wait_metrics: str | None = None
    # Those series' `server` label is its locks' wait-for graph's name,
    # `<name>:<server>` (its listings' blocking trees, the history's episodes),
    # not the server's own name (a status's): polled sources' graphs are so named.
    wait_label_prefixed = False
    # Its locks wait on each other: so they do where its servers' sessions do,
    # unless it says (set when the class is made).
    sees_waits: bool
    # The reason codes of its verdicts that say a lock's holder is gone (none).
    holder_gone: frozenset[str] = frozenset()
    # The CLI values (click parameter names) that ask for it by name.
    asking: tuple[str, ...] = ()
    # The module whose `clues` recognise its tools' messages in pasted text: its
    # package's `messages` unless it says (set when the class is made); a module
    # that is not there, or None, recognises nothing (its ids are the registry's).
    messages: str | None
    # Its repeatable options that take a value: its options before `own_options`.
    repeatable: tuple[Repeatable, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name: str | None = getattr(cls, "name", None)
        if name is None:
            return  # a base (ServerDeclared): its sources name themselves
        package = cls.__module__.rpartition(".")[0]
        derived = {
            "label": name,
            "id_prefix": name,
            "title": name,
            "config_tables": (name,),
            "messages": f"{package}.messages",
            "sees_waits": cls.wait_metrics is not None,
        }
        for attribute, value in derived.items():
            # Not where a class above it has one (a plugin keeps its declaration's).
            if not hasattr(cls, attribute):
                setattr(cls, attribute, value)

    def options(self) -> Sequence[Decorator]:
        return [*(option.option() for option in self.repeatable), *self.own_options()]

    def own_options(self) -> Sequence[Decorator]:
        """Its options after those the base makes."""
        return ()

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        # Declared, so that --help loads no plugin for them.
        return ()

    def asked(self, values: Mapping[str, Any]) -> bool:
        return any(values.get(name) for name in self.asking)

    def clues(self, text: str) -> Sequence[Clue]:
        if self.messages is None:
            return ()
        from importlib import import_module

        try:
            module = import_module(self.messages)
        except ModuleNotFoundError as missing:
            if missing.name != self.messages:
                raise  # its messages module is there, and failed
            return ()
        found: Sequence[Clue] = module.clues(text)
        return found

    def may_run(self, wanted: Wanted) -> bool:
        # Asked by its flags, or by its config table.
        return self.asked(wanted.values) or wanted.settings(self.name) is not None


class ServerDeclared(Declaring):
    """Defaults for a server source's declaration: its options from data."""

    # The option naming its servers: its listing's, saying `servers_help`, and
    # the action commands' naming a TARGET's server, saying `target_help`
    # (None: none).
    target_option: TargetOption | None = None
    servers_help = ""
    target_help = ""
    # Its idle holders' age of staleness by default, in seconds: its
    # `--<target_option>-idle-after` (None: no such option).
    idle_after: float | None = None

    @property
    def loading(self) -> tuple[str, ...]:
        """Values that load its plugin without asking for it: its --x-idle-after,
        which its select checks (a nan is refused there)."""
        flag = self._idle_flag()
        return () if flag is None else (flag[2:].replace("-", "_"),)

    def _idle_flag(self) -> str | None:
        if self.idle_after is None or self.target_option is None:
            return None
        return f"{self.target_option.flag}-idle-after"

    def options(self) -> Sequence[Decorator]:
        # Its servers' option first, then its --x-idle-after, then the rest.
        first: list[Decorator] = []
        if self.target_option is not None:
            first.append(self.target_option.option(self.servers_help))
        flag = self._idle_flag()
        if flag is not None and self.idle_after is not None:
            first.append(idle_after_option(flag, self.idle_after))
        return [*first, *super().options()]

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        if kind is not None or self.target_option is None:
            return ()
        return [self.target_option.option(self.target_help)]

    def asked(self, values: Mapping[str, Any]) -> bool:
        servers = self.target_option
        if servers is not None and values.get(servers.dest):
            return True
        return super().asked(values)

    def may_run(self, wanted: Wanted) -> bool:
        # Servers come from its flags or its config table.
        values = wanted.values
        return super().may_run(wanted) or any(values.get(name) is not None for name in self.loading)


def idle_after_option(flag: str, default: float) -> Decorator:
    """Its `--x-idle-after SECONDS` option (its listing's and the dashboard's)."""
    import click

    return click.option(
        flag,
        type=click.FloatRange(min=0),
        default=None,
        metavar="SECONDS",
        help=f"Idle (in transaction) holders older than this are stale [default: {default:g}].",
    )
