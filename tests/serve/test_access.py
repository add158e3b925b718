"""Who may read what, where serve may listen, and its settings: checked before
anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockwatch.serve.access import HEALTH, LOCKS, METRICS, Access
from lockwatch.serve.app import ServeError, plan
from lockwatch.serve.listen import ListenError, loopback_only, parse_listen
from lockwatch.serve.settings import ServeSettings, SettingsError, from_table, resolve

TOKEN = "s3cret-token-0123456789"


def test_without_a_token_everything_is_open() -> None:
    access = Access()
    for endpoint in (HEALTH, METRICS, LOCKS):
        assert access.allows(endpoint, None)


def test_with_a_token_locks_and_metrics_need_it_health_never() -> None:
    access = Access(TOKEN)
    assert access.allows(HEALTH, None)
    for endpoint in (METRICS, LOCKS):
        assert not access.allows(endpoint, None)
        assert not access.allows(endpoint, "Bearer wrong")
        assert not access.allows(endpoint, f"Basic {TOKEN}")
        assert not access.allows(endpoint, "Bearer " + TOKEN[:-1])
        assert not access.allows(endpoint, "Bearer " + TOKEN + "x")
        assert not access.allows(endpoint, "Bearer ")
        assert access.allows(endpoint, f"Bearer {TOKEN}")
        assert access.allows(endpoint, f"bearer   {TOKEN}  ")


def test_open_metrics_opens_metrics_only() -> None:
    access = Access(TOKEN, open_metrics=True)
    assert access.allows(METRICS, None)
    assert not access.allows(LOCKS, None)
    assert access.allows(LOCKS, f"Bearer {TOKEN}")


def test_the_token_never_shows_in_a_repr() -> None:
    assert TOKEN not in repr(Access(TOKEN))


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:9464", "127.0.0.1", 9464),
        ("[::1]:9464", "::1", 9464),
        (":9464", "0.0.0.0", 9464),
        ("*:0", "0.0.0.0", 0),
        ("localhost:80", "localhost", 80),
    ],
)
def test_listen_addresses(text: str, host: str, port: int) -> None:
    listen = parse_listen(text)
    assert (listen.host, listen.port) == (host, port)


@pytest.mark.parametrize(
    "text", ["9464", "::1:9464", "127.0.0.1:", "127.0.0.1:70000", "[::1]9464", "h:x"]
)
def test_bad_listen_addresses(text: str) -> None:
    with pytest.raises(ListenError):
        parse_listen(text)


def test_which_addresses_are_loopback() -> None:
    assert loopback_only("127.0.0.1")
    assert loopback_only("127.0.0.53")
    assert loopback_only("::1")
    assert loopback_only("localhost")
    assert not loopback_only("0.0.0.0")
    assert not loopback_only("::")
    assert not loopback_only("10.1.2.3")


def token_file(tmp_path: Path, text: str = TOKEN + "\n") -> str:
    path = tmp_path / "serve.token"
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def test_anything_but_loopback_needs_a_token(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="token"):
        plan(ServeSettings(listen="0.0.0.0:9464"))
    with pytest.raises(ServeError, match="token"):
        plan(ServeSettings(listen="0.0.0.0:9464", open_metrics=True))
    given = plan(ServeSettings(listen="0.0.0.0:9464", token_file=token_file(tmp_path)))
    assert given.access.token == TOKEN and not given.loopback
    assert plan(ServeSettings(listen="127.0.0.1:0")).access.token is None


@pytest.mark.parametrize("content", ["", "  \n", "two words\n", "\x00\x01"])
def test_an_unusable_token_file_is_refused(tmp_path: Path, content: str) -> None:
    with pytest.raises(ServeError, match="--token-file"):
        plan(ServeSettings(token_file=token_file(tmp_path, content)))
    with pytest.raises(ServeError, match="--token-file"):
        plan(ServeSettings(token_file=str(tmp_path / "missing")))


def test_serve_table_and_flags_over_it() -> None:
    tables = {"serve": {"listen": "0.0.0.0:9000", "open_metrics": True, "max_lock_series": 20}}
    assert from_table(tables, "x") == ServeSettings("0.0.0.0:9000", None, True, 20)
    flags = {"listen": "127.0.0.1:1", "max_lock_series": 0, "token_file": "/t"}
    assert resolve(flags, tables, "x") == ServeSettings("127.0.0.1:1", "/t", True, 0)
    assert resolve({}, {}, "x") == ServeSettings()


@pytest.mark.parametrize(
    "table",
    [
        {"listen": 9464},
        {"open_metrics": "yes"},
        {"max_lock_series": -1},
        {"max_lock_series": True},
        {"token_file": ""},
        {"listne": "127.0.0.1:1"},
    ],
)
def test_bad_serve_tables(table: dict[str, object]) -> None:
    with pytest.raises(SettingsError):
        from_table({"serve": table}, "lockwatch.toml")
