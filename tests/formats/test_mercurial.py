"""Mercurial's `.hg/wlock` and `.hg/store/lock`, held by a real hg, found by a
scan and judged as hg judges them (issue 33, item 3).

The holder is `hg debuglocks --set-wlock --set-lock`, which holds both until it
is stopped. hg's own answer is `hg debuglocks`: the holder of each lock, exit 0
only when none is held; it reaps a lock whose holder died on this host
(`lock.testlock`), so it is asked after lockwatch has looked.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import (
    WAIT_S,
    by_path,
    clean_env,
    codes,
    kill_and_reap,
    ls_json,
    need_tools,
    wait_until,
)

HG_ENV = {"HGUSER": "test", "HGPLAIN": "1", "HGRCPATH": ""}


def hg(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["hg", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env={**os.environ, **HG_ENV},
        check=False,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    need_tools("hg")
    path = tmp_path / "repo"
    path.mkdir()
    assert hg(path, "init").returncode == 0
    (path / "a").write_text("a\n")
    assert hg(path, "commit", "-Am", "first").returncode == 0
    return path


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            kill_and_reap(proc)


def hold(repo: Path, holders: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        ["hg", "debuglocks", "--set-wlock", "--set-lock"],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **HG_ENV},
        text=True,
    )
    holders.append(proc)
    wait_until(
        "hg to hold its locks",
        lambda: os.path.islink(repo / ".hg/wlock") and os.path.islink(repo / ".hg/store/lock"),
        proc=proc,
    )
    return proc


def locks(repo: Path) -> dict[str, dict[str, object]]:
    home = repo.parent / "home"
    clean_env(home)
    found = by_path(ls_json(repo, home, cwd=home, exit_codes=(0, 3))["locks"])
    return {
        name: found[str(repo / name)]
        for name in (".hg/wlock", ".hg/store/lock")
        if str(repo / name) in found
    }


def test_held_by_a_live_hg_then_stale_once_it_is_killed(
    repo: Path, holders: list[subprocess.Popen[str]]
) -> None:
    proc = hold(repo, holders)
    found = locks(repo)
    said = hg(repo, "debuglocks")
    assert said.returncode == 2, said.stdout  # hg: both held
    assert f"process {proc.pid}" in said.stdout
    assert set(found) == {".hg/wlock", ".hg/store/lock"}  # found by the scan
    for record in found.values():
        assert record["format"] == "mercurial", record
        assert record["state"] == "active", record
        holder = record["holder"]
        assert isinstance(holder, dict) and holder["pid"] == proc.pid

    kill_and_reap(proc)
    found = locks(repo)
    for record in found.values():
        assert (record["state"], codes(record)) == ("stale", ["holder_dead"]), record
    # hg agrees: it calls them stale and reaps them.
    said = hg(repo, "debuglocks")
    assert said.returncode == 0 and "lock:  free" in said.stdout, said.stdout
    assert not os.path.lexists(repo / ".hg/wlock")


def test_another_hosts_lock_is_unknown_and_hg_keeps_it(repo: Path) -> None:
    os.symlink("elsewhere:4321", repo / ".hg/wlock")
    record = locks(repo)[".hg/wlock"]
    assert (record["state"], codes(record)) == ("unknown", ["foreign_host"]), record
    said = hg(repo, "debuglocks")
    assert said.returncode != 0 and "host elsewhere" in said.stdout, said.stdout
    assert os.path.islink(repo / ".hg/wlock")  # hg never breaks it either
