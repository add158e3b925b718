"""Big trees stay sane (issue 33, item 5): a scan never walks into a pseudo
filesystem nobody named, and one odd lock never widens the table's other lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lockwatch.cli.table import WIDTHS, render_table
from lockwatch.clock import FrozenClock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import evaluate
from lockwatch.sources.files import scanner
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.mounts import pseudo_mounts
from tests.conftest import LOCAL_HOST, NOW, alive, lock_file
from tests.formats.common import clean_env, locks_dir

# The widest a table line can be: every column at its cap, two spaces between.
SANE = sum(WIDTHS) + 2 * (len(WIDTHS) - 1)

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw
24 22 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw
25 24 0:23 / /sys/fs/cgroup rw shared:8 - cgroup2 cgroup2 rw
26 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
27 26 0:24 / /dev/shm rw shared:3 - tmpfs tmpfs rw
28 22 0:25 / /srv/odd\\040dir rw - proc proc rw
29 22 0:26 / /run rw - tmpfs tmpfs rw
30 22 0:27 / /mnt/nfs rw - nfs4 server:/x rw
"""


def test_pseudo_filesystems_are_read_from_mountinfo(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(MOUNTINFO)
    assert pseudo_mounts(str(mountinfo)) == {
        "/proc",
        "/sys",
        "/sys/fs/cgroup",
        "/dev",
        "/srv/odd dir",
    }
    assert pseudo_mounts(str(tmp_path / "missing")) == frozenset()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/mountinfo")
def test_the_walk_of_root_passes_proc_and_sys_by() -> None:
    found: list[scanner.Candidate] = []
    subdirs: list[str] = []
    scanner._list_dir("/", found, subdirs, [])
    assert "/proc" not in subdirs and "/sys" not in subdirs, subdirs
    assert "/etc" in subdirs


def test_a_pseudo_mount_is_walked_only_when_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = tmp_path / "pseudo"
    inside.mkdir()
    (inside / "x.lock").write_text("")
    (tmp_path / "y.lock").write_text("")
    # As if a proc or sysfs were mounted there (mounting one needs privileges a
    # test should not use): the set the scanner read from mountinfo.
    monkeypatch.setattr(scanner, "_PSEUDO", [frozenset({str(inside)})])
    walked = {Path(c.path).name for c in scanner.find([str(tmp_path)])[0]}
    assert walked == {"y.lock"}
    named = {Path(c.path).name for c in scanner.find([str(inside)])[0]}
    assert named == {"x.lock"}


def test_one_huge_field_never_widens_the_table() -> None:
    odd = decode_file(lock_file("/srv/" + "n" * 300 + ".lock", {"pid": 100, "owner": "o" * 10_000}))
    plain = decode_file(lock_file("/srv/plain.lock", {"pid": 100}))
    processes = StaticProcesses(alive(100))
    assessed = [
        (lock, evaluate(lock, processes, FrozenClock(NOW), LOCAL_HOST)) for lock in (odd, plain)
    ]
    table = list(render_table(assessed, long=False, cwd="/", now=NOW))
    assert len(table) == 3
    assert all(len(line) <= SANE for line in table), [len(line) for line in table]
    assert "…" in table[1]
    long = list(render_table(assessed, long=True, cwd="/", now=NOW))
    assert any("o" * 10_000 in line for line in long)  # -l: whole, beneath its row
    assert all(len(line) <= SANE for line in long if line.startswith(("active", "stale")))


def test_ls_cuts_the_table_and_keeps_json_whole(tmp_path: Path) -> None:
    directory = locks_dir(tmp_path)
    (directory / "odd.lock").write_text(json.dumps({"pid": 1234567, "owner": "x" * 10_000}))
    for index in range(3):
        (directory / f"plain{index}.lock").write_text("")
    home = tmp_path / "home"

    def ls(*flags: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "lockwatch", "ls", *flags, str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env=clean_env(home),
            check=False,
        )
        assert done.returncode in (0, 3), done.stderr
        return done.stdout

    table = ls().splitlines()
    assert len(table) == 6  # the header, four locks, the summary
    assert max(len(line) for line in table) <= SANE
    records = {Path(r["path"]).name: r for r in json.loads(ls("--json"))["locks"]}
    assert records["odd.lock"]["holder"]["actor"] == "x" * 10_000
