"""lockwatch.toml: what it may hold, and clear errors for what it may not."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockwatch.config import Config, ConfigError
from lockwatch.sources.postgres.facts import AdvisoryKey, string_key
from lockwatch.sources.postgres.settings import DEFAULT_IDLE_AFTER
from lockwatch.sources.registry import configured
from lockwatch.sources.registry import load_config as load


def parse(path: Path) -> Config:
    """The config file at `path`, with every source's tables read (as `ls` reads it)."""
    from lockwatch.config import parse as parse_file

    return configured(parse_file(path))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lockwatch.toml"
    path.write_text(text)
    return path


def test_full_config(tmp_path: Path) -> None:
    config = parse(
        write(
            tmp_path,
            """
[postgres]
dsn = ["postgresql://a@db1/app", "postgresql://a@db2/app"]
idle_after = 30
all = true

[advisory]
strings = ["billing-sync"]

[advisory.namespaces]
1 = "agent"

[advisory.keys]
"-7" = "minus-seven"
""",
        )
    )
    pg = config.source("postgres")
    assert pg.dsns == ("postgresql://a@db1/app", "postgresql://a@db2/app")
    assert pg.idle_after == 30.0
    assert pg.all_rows is True
    names = pg.advisory
    assert names.name(AdvisoryKey("pair", key1=1, key2=42)) == "agent:42"
    assert names.name(AdvisoryKey("bigint", key=-7)) == "minus-seven"
    assert names.name(AdvisoryKey("bigint", key=string_key("billing-sync"))) == "billing-sync"


def test_single_dsn_string_and_defaults(tmp_path: Path) -> None:
    config = parse(write(tmp_path, '[postgres]\ndsn = "postgresql://x@h/db"\n'))
    pg = config.source("postgres")
    assert pg.dsns == ("postgresql://x@h/db",)
    assert pg.idle_after == DEFAULT_IDLE_AFTER
    assert pg.all_rows is False
    # A source whose tables the file lacks is handed None, its defaults, and its
    # plugin is not loaded to read nothing (sources/lazy.py).
    assert config.source("kernel") is None


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[postgres\n", "not valid TOML"),
        ("postgres = 1\n", r"\[postgres\] must be a table"),
        ("[postgres]\ndsn = 5\n", "postgres.dsn"),
        ("[postgres]\nidle_after = -1\n", "postgres.idle_after"),
        ("[postgres]\nidle_after = true\n", "postgres.idle_after"),
        ("[postgres]\nall = 'yes'\n", "postgres.all"),
        ("[advisory.namespaces]\nagent = 'x'\n", "'agent' is not an integer key"),
        ("[advisory.namespaces]\n1 = 2\n", "advisory names must be strings"),
        ("[advisory]\nstrings = 'x'\n", "advisory.strings"),
        ("kernel = 1\n", r"\[kernel\] must be a table"),
        ("[kernel]\nenabled = 'yes'\n", "kernel.enabled must be true or false"),
    ],
)
def test_bad_config_says_where_and_why(tmp_path: Path, text: str, complaint: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=complaint) as caught:
        parse(path)
    assert str(path) in str(caught.value)


def test_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    (user_dir / "lockwatch.toml").write_text("[postgres]\nidle_after = 5\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr("platformdirs.user_config_dir", lambda app: str(user_dir))
    assert load().source("postgres").idle_after == 5.0  # only the user config exists
    (cwd / "lockwatch.toml").write_text("[postgres]\nidle_after = 7\n")
    assert load().source("postgres").idle_after == 7.0  # the current directory wins
    (cwd / "lockwatch.toml").unlink()
    (user_dir / "lockwatch.toml").unlink()
    assert load() == configured(Config())


def test_explicit_path_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load(tmp_path / "missing.toml")


def test_each_source_reads_its_own_tables(tmp_path: Path) -> None:
    """The registry reads every source's settings (config.py knows no source)."""
    from lockwatch.sources.registry import SOURCES

    config = parse(write(tmp_path, "[kernel]\nenabled = true\n"))
    assert set(config.sources) == {source.name for source in SOURCES}
    assert config.source("kernel").enabled is True


def test_config_alone_reads_no_source_table(tmp_path: Path) -> None:
    """config.py keeps the tables as read; the sources' own are the registry's to read."""
    from lockwatch.config import parse as parse_file

    config = parse_file(write(tmp_path, "[kernel]\nenabled = 'yes'\n"))
    assert config.sources == {} and config.tables["kernel"] == {"enabled": "yes"}
    with pytest.raises(ConfigError, match=r"kernel\.enabled"):
        configured(config)


# -- [[protocols]]: what a path's lock files are (issue 42) -------------------------


def test_protocols_are_read_in_order_and_match_by_glob(tmp_path: Path) -> None:
    from lockwatch.sources.files.protocols import Protocols

    config = parse(
        write(
            tmp_path,
            """
[[protocols]]
path = "/srv/app/locks/*.lock"
kind = "kernel"

[[protocols]]
path = "/srv/*"
kind = "existence"
""",
        )
    )
    protocols = config.source("file")
    assert isinstance(protocols, Protocols)
    assert protocols.kind_of("/srv/app/locks/build.lock") == "kernel"  # the first match
    assert protocols.kind_of("/srv/app/job.pid") == "existence"
    assert protocols.kind_of("/var/lock/x.lock") is None


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ('path = "/srv/*"\nkind = "flock"', "kind must be 'kernel' or 'existence'"),
        ('path = "locks/*"\nkind = "kernel"', "must be absolute"),
        ('kind = "kernel"', "`path` must be a path or glob"),
        ('path = "/srv/*"\nkind = "kernel"\nglob = "x"', "unknown key 'glob'"),
    ],
)
def test_a_bad_protocols_entry_says_which_and_why(tmp_path: Path, entry: str, said: str) -> None:
    with pytest.raises(ConfigError, match="protocols entry 1") as raised:
        parse(write(tmp_path, f"[[protocols]]\n{entry}\n"))
    assert said in str(raised.value)


@pytest.mark.parametrize(
    ("table", "value"),
    [("postgres", "idle_after"), ("mysql", "idle_after"), ("remote", "timeout")],
)
def test_seconds_settings_are_finite_numbers(table: str, value: str) -> None:
    # One check (servers.config_seconds) for every source's number of seconds:
    # a bool, a nan or a negative number is refused; a timeout must be > 0.
    from lockwatch.sources.registry import read_config

    assert getattr(read_config({table: {value: 5}}, "cfg")[table], value) == 5.0
    for bad in (True, float("nan"), -1, "5"):
        with pytest.raises(ConfigError, match=rf"cfg: {table}\.{value} must be a number"):
            read_config({table: {value: bad}}, "cfg")
    zero = {table: {value: 0}}
    if table == "remote":
        with pytest.raises(ConfigError, match=r"remote\.timeout must be a number of seconds > 0"):
            read_config(zero, "cfg")
    else:
        assert getattr(read_config(zero, "cfg")[table], value) == 0.0
