"""`lockwatch ls` against hostile names and awkward arguments."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tests.conftest import run_cli

run = run_cli


def test_names_that_are_not_utf8_still_give_json(tmp_path: Path) -> None:
    bad_dir = os.path.join(os.fsencode(tmp_path), b"dir\xfe")
    os.mkdir(bad_dir)
    with open(os.path.join(bad_dir, b"bad\xffname.lock"), "wb") as handle:
        handle.write(b"4000000\n")
    code, out, _ = run("ls", "--json", "--fail-on-stale", str(tmp_path))
    assert code == 3  # the stale lock is still seen: cron monitors keep working
    (lock,) = json.loads(out)["locks"]
    assert lock["path"].endswith("dir\\xfe/bad\\xffname.lock")
    assert lock["state"] == "stale"


def test_table_never_passes_control_characters_to_the_terminal(tmp_path: Path) -> None:
    (tmp_path / "e\x1b[31mvil\nname.lock").write_text(
        json.dumps({"pid": 1, "hostname": "vm\x1b[2J", "acquired_at": "2026-01-01T00:00:00Z"})
    )
    code, out, _ = run("ls", "-l", str(tmp_path))
    assert code == 0
    assert "\x1b" not in out
    assert "e\\x1b[31mvil\\x0aname" in out
    assert len(out.splitlines()) >= 3  # header, one row, its reasons, summary: no split row


def test_socket_named_like_a_lock_is_invalid_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "sock.lock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        for target in (tmp_path, path):
            code, out, _ = run("ls", "--json", str(target))
            doc = json.loads(out)
            assert code == 0
            assert doc["errors"] == []
            assert [r["code"] for r in doc["locks"][0]["reasons"]] == ["not_regular_file"]
    finally:
        server.close()


def test_named_temp_and_dependency_files_are_not_locks(tmp_path: Path) -> None:
    for name in ("x.lock.req_1.tmp", "poetry.lock", "Cargo.lock"):
        (tmp_path / name).write_text("1")
    (tmp_path / "odd-name").write_text("4000000")
    paths = sorted(str(p) for p in tmp_path.iterdir())
    _, out, _ = run("ls", "--json", *paths)
    assert [Path(lock["path"]).name for lock in json.loads(out)["locks"]] == ["odd-name"]


def test_the_same_directory_through_a_symlink_is_listed_once(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.lock").write_text("")
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    _, out, _ = run("ls", "--json", str(real), str(tmp_path / "alias"))
    assert len(json.loads(out)["locks"]) == 1


def test_empty_path_is_a_usage_error() -> None:
    code, _, err = run("ls", "")
    assert code == 2
    assert "empty PATH" in err


def test_bad_config_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "lockwatch.toml"
    config.write_text("[postgres]\nidle_after = 'soon'\n")
    code, _, err = run("ls", "--config", str(config), str(tmp_path))
    assert code == 2
    assert "idle_after" in err and "Traceback" not in err


def test_a_root_reached_through_a_link_inside_another_root_is_listed_once(
    tmp_path: Path,
) -> None:
    sub = tmp_path / "real" / "sub"
    sub.mkdir(parents=True)
    (sub / "a.pid").write_text("1")
    (tmp_path / "link").symlink_to(sub, target_is_directory=True)
    # "link" sorts before "real" but resolves inside it: still one listing.
    _, out, _ = run("ls", "--json", str(tmp_path / "link"), str(tmp_path / "real"))
    assert len(json.loads(out)["locks"]) == 1


def test_non_finite_idle_threshold_is_refused(tmp_path: Path) -> None:
    code, _, err = run("ls", "--pg-idle-after", "nan", str(tmp_path))
    assert code == 2 and "finite" in err
    config = tmp_path / "lockwatch.toml"
    config.write_text("[postgres]\nidle_after = nan\n")
    code, _, err = run("ls", "--config", str(config), str(tmp_path))
    assert code == 2 and "idle_after" in err


def test_a_vanished_working_directory_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    code, _, err = run("ls")
    assert code == 2
    assert "no longer exists" in err and "Traceback" not in err
