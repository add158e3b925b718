"""The shape's proof (issue 43): a new source is its package and one registry
entry. lockwatch is copied, the beacon package (tests/shape/beacon/: options, a
[beacon] config table, a polled server, a break) dropped into the copy's
`sources/`, one `LazySource` line added to its registry (graft.py), and then
the copy's own CLI and dashboard, each in an interpreter of its own, show and
break the leases of a real beacon server (tests/shape/beacon_server.py, HTTP on
a loopback port). Nothing is patched at run time."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shape import graft
from tests.shape.beacon_server import BeaconServer
from tests.shape.conftest import TOKEN

DRIVER = Path(__file__).resolve().parent / "dashboard_driver.py"
SUMMARY = "Beacon leases (a made-up lease service, the worked example)"


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return graft.graft(tmp_path_factory.mktemp("grafted"))


def lease(server: BeaconServer, key: str) -> str:
    return f"beacon:{server.name}:{key}"


def test_the_copy_differs_by_the_package_and_one_registry_line(copy: Path) -> None:
    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts}

    added = files(copy / "lockwatch") - files(graft.ROOT / "lockwatch")
    assert added and all(name.startswith("sources/beacon") for name in added), added
    assert files(graft.ROOT / "lockwatch") <= files(copy / "lockwatch")
    before = (graft.ROOT / graft.REGISTRY).read_text().splitlines()
    after = (copy / graft.REGISTRY).read_text().splitlines()
    changed = [line for line in difflib.unified_diff(before, after, n=0) if line[:1] in "+-"]
    assert changed[2:] == ['+    LazySource("lockwatch.sources.beacon"),'], changed


def test_help_lists_it_from_the_registry(copy: Path) -> None:
    """Its summary (declared.py) in `--help`, the action commands' and those of
    the commands that look at sources, its options in `ls --help`: none of it
    written anywhere but in its package."""
    for args in (("--help",), ("break", "--help"), ("ls", "--help"), ("watch", "--help")):
        done = graft.run(copy, *args)
        assert done.returncode == 0, done.stderr
        # As --help wraps it (at spaces, and after a word's hyphen).
        assert "".join(SUMMARY.split()) in "".join(done.stdout.split()), args
    done = graft.run(copy, "ls", "--help")
    assert "--beacon URL" in done.stdout and "--beacon-prefix KEY" in done.stdout
    # The tree it was copied from lists no beacon: the line came with the entry.
    for args in (("--help",), ("break", "--help")):
        original = subprocess.run(
            [sys.executable, "-m", "lockwatch", *args], capture_output=True, text=True, check=True
        )
        assert "beacon" not in original.stdout.lower()


def test_ls_shows_its_leases_judged_by_its_rules(copy: Path, beacon: BeaconServer) -> None:
    done = graft.run(copy, "ls", "--json", "--beacon", beacon.url)
    assert done.returncode == 0, done.stderr
    records = {r["id"]: r for r in json.loads(done.stdout)["locks"]}
    lapsed, live = records[lease(beacon, "nightly-report")], records[lease(beacon, "deploy")]
    assert (lapsed["source"], lapsed["format"], lapsed["state"]) == (
        "beacon", "beacon-lease", "stale",
    )  # fmt: skip
    assert [r["code"] for r in lapsed["reasons"]] == ["beacon_lapsed"]
    assert (lapsed["fence"], lapsed["owner"], lapsed["key"]) == (41, "cron@db7", "nightly-report")
    assert live["state"] == "active" and live["next_change_at"] is not None

    # Its own option: only the leases under a prefix.
    done = graft.run(copy, "ls", "--json", "--beacon", beacon.url, "--beacon-prefix", "night")
    assert [r["key"] for r in json.loads(done.stdout)["locks"]] == ["nightly-report"]

    done = graft.run(copy, "ls", "--beacon", beacon.url)
    line = next(line for line in done.stdout.splitlines() if "nightly-report" in line)
    assert "stale" in line and "cron@db7 (fence 41)" in line


def test_its_config_table_names_its_servers(
    copy: Path, beacon: BeaconServer, tmp_path: Path
) -> None:
    config = tmp_path / "lockwatch.toml"
    config.write_text(f'[beacon]\nurl = ["{beacon.url}"]\nprefix = "dep"\n')
    done = graft.run(copy, "ls", "--json", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert [r["key"] for r in json.loads(done.stdout)["locks"]] == ["deploy"]

    # A key its reader does not know is refused, as in every table: one line, exit 2.
    config.write_text(f'[beacon]\nurls = ["{beacon.url}"]\n')
    done = graft.run(copy, "ls", "--json", "--config", str(config))
    assert done.returncode == 2 and "beacon.urls" in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_break_from_the_cli(copy: Path, beacon: BeaconServer, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    act = ("--reason", "cron died, INC-9", "--yes", "--audit-log", str(audit))

    # Without --beacon it cannot reach the server: one line naming the option.
    done = graft.run(copy, "break", lease(beacon, "nightly-report"), *act, BEACON_TOKEN=TOKEN)
    assert done.returncode == 1, done.stderr
    assert "--beacon" in done.stderr and done.stderr.count("\n") == 1, done.stderr

    # A live lease: only with --force, as for every source.
    reach = ("--beacon", beacon.url)
    done = graft.run(copy, "break", lease(beacon, "deploy"), *act, *reach, BEACON_TOKEN=TOKEN)
    assert done.returncode == 1 and "--force" in done.stderr
    assert not beacon.deletes()

    done = graft.run(
        copy, "break", lease(beacon, "nightly-report"), *act, *reach, BEACON_TOKEN=TOKEN
    )
    assert done.returncode == 0, done.stderr
    (delete,) = beacon.deletes()
    assert (delete.path, delete.if_match, delete.token) == (
        "/v1/leases/nightly-report", "41", TOKEN,
    )  # fmt: skip
    assert "nightly-report" not in beacon.leases
    last = json.loads(audit.read_text().splitlines()[-1])
    assert last["target"]["source"] == "beacon" and last["result"] == "success"
    assert last["target"]["fence"] == 41


def test_break_from_the_dashboard(copy: Path, beacon: BeaconServer, tmp_path: Path) -> None:
    """The copy's dashboard on the server its config names (with the token file):
    a lease put on the server after the first poll shows (it polls), `b` on the
    lapsed lease drops it on the server (the CAS delete), and the audit log has it."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)  # a token file others may read is refused, as a password file
    config = tmp_path / "lockwatch.toml"
    config.write_text(f'[beacon]\nurl = ["{beacon.url}"]\ntoken_file = "{token}"\n')
    audit = tmp_path / "audit.jsonl"
    lapsed, late = lease(beacon, "nightly-report"), lease(beacon, "late")
    args = ["--config", str(config), "--audit-log", str(audit), "--refresh", "0.2"]
    driver = subprocess.Popen(
        [sys.executable, str(DRIVER), lapsed, late, "--", *args],
        env=graft.environ(copy),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Its first poll (or its end, when it could not start).
        while not beacon.wait_for(1, "GET", timeout=0.5):
            if driver.poll() is not None:
                pytest.fail(f"the dashboard ended: {driver.communicate()[1]}")
        beacon.put("late", "batch@db2", fence=3, lasts=600.0)
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, err
    seen = json.loads(out.splitlines()[-1])
    assert seen["lockwatch"].startswith(str(copy)), seen
    assert seen["rows"] == sorted([lease(beacon, "deploy"), late])
    assert any("dropped nightly-report (fence 41)" in note for note in seen["notes"]), seen
    (delete,) = beacon.deletes()
    assert (delete.if_match, delete.token) == ("41", TOKEN)
    last = json.loads(audit.read_text().splitlines()[-1])
    assert last["target"]["id"] == lapsed and last["result"] == "success"


def test_the_copy_keeps_the_layer_rules(copy: Path, tmp_path: Path) -> None:
    """tests/test_layers.py run on the copy: the beacon, as a package of
    lockwatch's, imports down the layers and makes no import circle. The inner
    run's sandbox is made under a HOME of its own (this session's is written by
    the tests beside this one, which the inner run would take for the runner's)."""
    env = {k: v for k, v in graft.environ(copy).items() if not k.startswith("XDG_")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-n0", "-p", "no:cacheprovider",
            "--import-mode=append", str(graft.ROOT / "tests" / "test_layers.py"),
            "-k", "sources_do_not or import_circles or run_down or source_facts",
        ],
        env=env,
        cwd=graft.ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "4 passed" in done.stdout, done.stdout[-500:]
