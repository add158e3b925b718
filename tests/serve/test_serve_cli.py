"""`lockwatch serve` refuses what it should before it starts: exit 2, in words."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli


def test_a_listen_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    code, _, err = run_cli("serve", str(tmp_path), "--listen", "0.0.0.0:0")
    assert code == 2
    assert "give a token (--token-file FILE" in err


def test_bad_options_and_config(tmp_path: Path) -> None:
    code, _, err = run_cli("serve", str(tmp_path), "--listen", "9464")
    assert code == 2 and "HOST:PORT" in err
    code, _, err = run_cli("serve", str(tmp_path), "--token-file", str(tmp_path / "missing"))
    assert code == 2 and "--token-file" in err
    config = tmp_path / "lockwatch.toml"
    config.write_text('[serve]\nmax_lock_series = "many"\n')
    code, _, err = run_cli("serve", str(tmp_path), "--config", str(config))
    assert code == 2 and "serve.max_lock_series" in err
    code, _, err = run_cli("serve", str(tmp_path), "--remote", "http://ops:pw@db1:9464")
    assert code == 2 and "pw" not in err and "token file" in err


def test_an_address_in_use_is_refused(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = run_cli("serve", str(tmp_path), "--listen", f"127.0.0.1:{port}")
    assert code == 2 and "cannot listen on" in err


def test_help_names_the_endpoints_and_the_token() -> None:
    code, out, _ = run_cli("serve", "--help")
    assert code == 0
    for word in ("/metrics", "/v1/locks", "/healthz", "--token-file", "--open-metrics",
                 "--max-lock-series", "--remote", "--pg", "--kernel"):  # fmt: skip
        assert word in out, word


def test_breaking_another_hosts_lock_names_the_command_there(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    target = "remote:http://db7:9464#file:/srv/locks/deploy.lock"
    code, _, err = run_cli("break", target, "--reason", "INC-9", "--yes", "--audit-log", str(audit))
    assert code == 1
    assert "On db7 run: lockwatch break file:/srv/locks/deploy.lock --reason" in err
    import json

    (record,) = [json.loads(line) for line in audit.read_text().splitlines()]
    assert (record["event"], record["code"]) == ("action_refused", "remote")
    assert record["target"]["id"] == target


def test_serve_takes_every_sources_options_from_the_registry() -> None:
    """Built from the registry, as `ls` and the dashboard are: a new source's
    flags reach serve with nothing named here."""
    import click

    from lockwatch.cli.serve import serve
    from lockwatch.sources.registry import SOURCES

    own = {name for param in serve.params for name in param.opts}
    for source in SOURCES:
        for decorator in source.options():
            probe = decorator(click.command()(lambda **_: None))
            for param in probe.params:
                assert set(param.opts) <= own, (source.name, param.opts)
