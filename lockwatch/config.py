"""`lockwatch.toml`: what every run shares, and each source's own tables.

Looked for in the current directory, then in the user config directory
(platformdirs), unless `--config` names a file. Flags override it. A file
found there that someone other than you or root owns or could have written is
not loaded (lockwatch/trusted.py has the rule): one line says which and why.
Keys and tables nobody reads are errors, with the closest name lockwatch knows.

    readonly = true        # (top level) no break, steal, release or cancel, anywhere

    [actions]
    audit_log = "/var/log/lockwatch/audit.jsonl"  # default: the user state dir
    audit_key = "/etc/lockwatch/audit.key"        # HMAC key, apart from the log;
                                                  # default: the user config dir
    audit_syslog = true    # also send each record's hash to syslog/journald; refused
                           # when syslog cannot be reached ("best-effort": act anyway)
    tombstone_dir = ".lockwatch-broken"           # relative: beside each lock

Each source owns its tables and documents them in its plugin module
(lockwatch/sources/*/plugin.py): [postgres] and [advisory] (servers,
thresholds, advisory key names), [kernel] (list the kernel's locks). This
module reads none of them: it keeps every table as read, and whoever builds
what to watch has the registry read the sources' own
(`lockwatch.sources.registry.configured`), so the config knows no source.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.slots import lean_dataclass

FILE_NAME = "lockwatch.toml"
# A config is a page of settings: 256 KiB is not one, a deeper nesting than this
# is no table any reader asks for, and nor are this many keys. Depth and keys are
# counted before tomllib parses: 40 KB of dotted keys took it 9 s and 1.6 GB.
MAX_BYTES = 256 * 1024
MAX_DEPTH = 16
MAX_KEYS = 10_000
_TOO_DEEP = "nested too deeply (more than {} levels of tables and arrays)"
SYSLOG_MODES = ("required", "best-effort")

# The tables commands read for themselves (not the sources', not [actions]):
# listed here so that every command refuses a misspelt key in them, not only the
# command that reads them (`lockwatch serve` checks [serve] against this too).
COMMAND_TABLES: Mapping[str, frozenset[str]] = {
    "serve": frozenset({"listen", "token_file", "open_metrics", "max_lock_series"}),
    "history": frozenset({"path", "retention_days", "max_mb"}),
}


class ConfigError(ValueError):
    """The config file exists but cannot be used; the message says where and why."""


@lean_dataclass(frozen=True)
class Config:
    readonly: bool = False
    audit_log: str | None = None
    tombstone_dir: str | None = None
    audit_key: str | None = None
    # "required" (no action when syslog cannot be reached), "best-effort", None: off.
    audit_syslog: str | None = None
    # Each source's settings from its own tables, by source name, once the
    # registry has read them (`registry.configured`); absent: not read (defaults).
    sources: Mapping[str, Any] = field(default_factory=dict)
    # Where it was read from, and every table as read: commands read their own
    # tables (`lockwatch serve`: [serve]).
    where: str = "config"
    tables: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def source(self, name: str) -> Any:
        return self.sources.get(name)


def default_paths() -> list[Path]:
    from platformdirs import user_config_dir

    return [Path.cwd() / FILE_NAME, Path(user_config_dir("lockwatch")) / FILE_NAME]


_warned: set[str] = set()


def _warn(line: str) -> None:
    from lockwatch.model.text import terminal_safe

    if line not in _warned:  # a command that loads the config twice says it once
        _warned.add(line)
        print(f"lockwatch: {terminal_safe(line)}", file=sys.stderr)


def load(
    explicit: str | os.PathLike[str] | None = None,
    *,
    warn: Callable[[str], None] = _warn,
) -> Config:
    """The config in force: `explicit` if given (it must exist and be safe), else
    the first default path that exists and that nobody but you or root could
    have written (`warn` says why one was passed over), else defaults."""
    from lockwatch.trusted import NAMED, SETTINGS, Refused, read_file

    if explicit is not None:
        path = Path(explicit)
        try:
            data = read_file(path, MAX_BYTES, NAMED)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such config file") from None
        except Refused as exc:
            raise ConfigError(f"{path}: not loaded: {exc.why}") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        return parse_bytes(data, str(path))
    for candidate in default_paths():
        try:
            data = read_file(candidate, MAX_BYTES, SETTINGS)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except Refused as exc:
            if not exc.untrusted:
                raise ConfigError(f"{candidate}: not loaded: {exc.why}") from None
            warn(
                f"{candidate}: not loaded: {exc.why}; to use it as it is, read it and pass"
                f" --config {candidate}"
            )
            continue
        except OSError as exc:  # e.g. a config directory we may not search
            raise ConfigError(f"{candidate}: cannot read: {exc.strerror or exc}") from exc
        return parse_bytes(data, str(candidate))
    return Config()


def parse(path: Path) -> Config:
    """The config file at `path` (named on purpose: any owner, nobody else writing)."""
    return load(path)


def parse_bytes(data: bytes, where: str) -> Config:
    import tomllib  # only when there is a file: most runs have none

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: cannot read: not UTF-8 text ({exc.reason})") from exc
    _check_shape(text, where)
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    except RecursionError:
        raise ConfigError(f"{where}: {_TOO_DEEP.format(MAX_DEPTH)}") from None
    _check_depth(tables, where)
    return from_mapping(tables, where)


_STRING_START = lazy_compile(r"[\"'#]")
_BASIC_STRING = lazy_compile(r'"(?:[^"\\\n]|\\.)*"?')
_LITERAL_STRING = lazy_compile(r"'[^'\n]*'?")
_DOTTED = lazy_compile(r"[\w-]+(?:[ \t]*\.[ \t]*[\w-]+)+")
_BRACKET = lazy_compile(r"[\[\]{}]")


def _skeleton(text: str) -> str:
    """`text` with its strings as `s` and its comments gone, in one pass: what
    is left shows its keys, dots and brackets. Not a parser (tomllib is): a
    count of what a parse would build, made in linear time."""
    out: list[str] = []
    at = 0
    while (found := _STRING_START.search(text, at)) is not None:
        start = found.start()
        out.append(text[at:start])
        quote = text[start]
        if quote == "#":
            end = text.find("\n", start)
        elif text.startswith(quote * 3, start):
            end = text.find(quote * 3, start + 3)
            end = -1 if end < 0 else end + 3
        elif quote == "'":
            end = _LITERAL_STRING.match(text, start).end()  # type: ignore[union-attr]
        else:
            end = _BASIC_STRING.match(text, start).end()  # type: ignore[union-attr]
        if end < 0:
            return "".join(out)  # an unclosed string or comment: tomllib says so
        out.append("" if quote == "#" else "s")
        at = end
    out.append(text[at:])
    return "".join(out)


def _check_shape(text: str, where: str) -> None:
    """ConfigError when `text` has more keys than MAX_KEYS or nests deeper than
    MAX_DEPTH (dotted keys, headers, arrays, inline tables), before any parse."""
    skeleton = _skeleton(text)
    keys = skeleton.count("=") + skeleton.count("[")
    for match in _DOTTED.finditer(skeleton):
        if match.group().count(".") >= MAX_DEPTH:
            raise ConfigError(f"{where}: {_TOO_DEEP.format(MAX_DEPTH)}")
    depth = 0
    for match in _BRACKET.finditer(skeleton):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise ConfigError(f"{where}: {_TOO_DEEP.format(MAX_DEPTH)}")
    if keys > MAX_KEYS:
        raise ConfigError(
            f"{where}: more than {MAX_KEYS:,} keys and tables: no settings file has that many"
        )


def _check_depth(data: dict[str, Any], where: str) -> None:
    # A walk with a stack of its own: dotted keys nest without limit in tomllib.
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(f"{where}: {_TOO_DEEP.format(MAX_DEPTH)}")
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)


def _table(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    return value


def from_mapping(data: dict[str, Any], where: str = "config") -> Config:
    """The settings every run shares, checked; the sources' tables kept as read
    (each key they ask for remembered, for `refuse_unknown`)."""
    data = Asked(data)
    readonly = data.get("readonly", False)
    if not isinstance(readonly, bool):
        raise ConfigError(f"{where}: readonly must be true or false")
    actions = _table(data, "actions", where)
    paths: dict[str, str | None] = {}
    for key in ("audit_log", "tombstone_dir", "audit_key"):
        value = actions.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}: actions.{key} must be a path")
        paths[key] = os.path.expanduser(value) if value else None
    audit_syslog = actions.get("audit_syslog", False)
    if audit_syslog is not False and audit_syslog is not True and audit_syslog not in SYSLOG_MODES:
        raise ConfigError(f'{where}: actions.audit_syslog must be true or false (or "best-effort")')
    for name, keys in COMMAND_TABLES.items():
        table = _table(data, name, where)
        for key in keys:
            table.get(key)
    return Config(
        readonly=readonly,
        audit_log=paths["audit_log"],
        tombstone_dir=paths["tombstone_dir"],
        audit_key=paths["audit_key"],
        audit_syslog="required" if audit_syslog is True else audit_syslog or None,
        where=where,
        tables=data,
    )


# -- keys nobody reads ---------------------------------------------------------------
#
# Each source reads its own tables (the config knows no source). Rather than
# each keeping a list of its keys beside the code that reads them, a table
# remembers the keys it was asked for: once every reader has run, a key nobody
# asked for is a misspelling (or a table that does not exist), and the keys asked
# for are the names to suggest. A table read whole (its items) is a map whose
# keys are the user's own ([advisory.keys], [remote.token_files]).


class Asked(dict[str, Any]):
    """A config table that remembers which keys were asked for."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self.asked: set[str] = set()
        self.whole = False

    def _wrapped(self, key: str, value: Any) -> Any:
        if isinstance(value, dict) and not isinstance(value, Asked):
            value = Asked(value)
            dict.__setitem__(self, key, value)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        if not super().__contains__(key):
            return default
        return self._wrapped(key, super().__getitem__(key))

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return self._wrapped(key, super().__getitem__(key))

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.asked.add(key)
        return super().__contains__(key)

    def present(self) -> Any:
        """Its keys, without counting as reading them all."""
        return super().keys()

    def keys(self) -> Any:
        self.whole = True
        return super().keys()

    def __iter__(self) -> Iterator[str]:
        self.whole = True
        return super().__iter__()

    def items(self) -> Any:
        self.whole = True
        return [(key, self._wrapped(key, value)) for key, value in list(super().items())]

    def values(self) -> Any:
        return [value for _, value in self.items()]


def refuse_unknown(tables: Mapping[str, Any], where: str) -> None:
    """ConfigError naming the first key or table no reader asked for in `tables`
    (read by `from_mapping` and every reader since), with the closest known name."""
    if not isinstance(tables, Asked):
        return
    stack: list[tuple[str, Asked]] = [("", tables)]
    while stack:
        prefix, table = stack.pop()
        if not table.whole:
            for key in sorted(table.present()):
                if key not in table.asked:
                    value = dict.__getitem__(table, key)
                    raise ConfigError(_unknown(where, prefix, key, value, table))
        for key in sorted(table.present(), reverse=True):
            value = dict.__getitem__(table, key)
            if isinstance(value, Asked):
                stack.append((f"{prefix}{key}.", value))


def _unknown(where: str, prefix: str, key: str, value: Any, table: Asked) -> str:
    import difflib  # only for a key that may be a typo: off the start-up path

    close = difflib.get_close_matches(key, sorted(table.asked), n=1, cutoff=0.6)
    if isinstance(value, dict):
        what = f"table [{prefix}{key}]"
        hint = f" (did you mean [{prefix}{close[0]}]?)" if close else ""
    else:
        what = f"key {prefix}{key}"
        hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
    return f"{where}: unknown {what}{hint}"
