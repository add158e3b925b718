"""Inputs read whole are bounded before they are held (issue 47, items 12, 13,
14 and 21): `why -` on /dev/zero grew to 5.3 GB in 8 s; `replay /proc/kmsg`
hung (a "regular" file whose read blocks); a 40 MB recording of `x` lines took
351 MB and a blank screen for 27 s; a 40 KB config of dotted keys took tomllib
9.2 s and 1.59 GB before "nested too deeply". Each is now refused or cut in one
line, with a flat RSS, against the real /dev/zero, /proc and files.
"""

from __future__ import annotations

from pathlib import Path

from lockwatch.cli.why import MAX_STDIN_BYTES
from lockwatch.config import MAX_DEPTH, MAX_KEYS
from lockwatch.sources.recording import MAX_BAD_LINES
from tests.adversarial.test_bounded_files import RSS_LIMIT_KB, run

HEADER = b'{"lockwatch":"recording/1","host":"here","started_at":"2026-01-01T00:00:00+00:00"}\n'


def test_why_reads_at_most_its_cap_of_dev_zero_and_says_so(tmp_path: Path) -> None:
    done, rss = run(tmp_path, "why", "-", stdin="/dev/zero")
    assert done.returncode in (0, 1), done.stderr[:500]
    said = f"standard input is over {MAX_STDIN_BYTES >> 10} KiB: only its first"
    assert said in done.stderr.splitlines()[0]
    assert "Traceback" not in done.stderr
    assert rss < RSS_LIMIT_KB, rss
    # Its error is one short line: the 64 KiB of NULs read as one "path" were
    # echoed whole, 256 KB of \x00 escapes on one line.
    assert all(len(line) < 1000 for line in done.stderr.splitlines()), len(done.stderr)
    assert "chars)" in done.stderr


def test_replay_of_proc_kmsg_is_refused_not_hung(tmp_path: Path) -> None:
    # A regular file to stat, of size 0, whose read blocks until the kernel logs.
    done, _ = run(tmp_path, "replay", "/proc/kmsg")
    assert done.returncode == 2
    assert "/proc/kmsg: not read: a file of the kernel's proc file system" in done.stderr


def test_a_config_in_proc_is_refused_by_name(tmp_path: Path) -> None:
    done, _ = run(tmp_path, "--config", "/proc/self/environ", "ls", str(tmp_path))
    assert done.returncode == 2
    assert "/proc/self/environ: not loaded: a file of the kernel's proc file system" in (
        done.stderr
    )


def test_a_recording_of_x_lines_stops_after_its_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    with path.open("wb") as out:
        out.write(HEADER)
        out.write(b"x\n" * 20_000_000)  # 40 MB, as the issue's
    done, rss = run(tmp_path, "replay", str(path))
    assert done.returncode == 2
    (line,) = [line for line in done.stderr.splitlines() if "x.jsonl" in line]
    assert f"over {MAX_BAD_LINES:,} lines are no change set" in line
    assert rss < RSS_LIMIT_KB, rss


def test_a_config_of_deep_dotted_keys_is_refused_before_parsing(tmp_path: Path) -> None:
    config = tmp_path / "deep.toml"
    config.write_text("a" + ".a" * 20_000 + " = 1\n")  # 40 KB
    done, rss = run(tmp_path, "--config", str(config), "ls", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"lockwatch: {config}: nested too deeply (more than {MAX_DEPTH} levels of tables"
        " and arrays)"
    ] or done.stderr.strip().endswith(f"more than {MAX_DEPTH} levels of tables and arrays)")
    assert len(done.stderr.strip().splitlines()) == 1
    assert rss < RSS_LIMIT_KB, rss


def test_a_config_of_too_many_keys_is_refused_before_parsing(tmp_path: Path) -> None:
    config = tmp_path / "many.toml"
    config.write_text("".join(f"k{n} = 1\n" for n in range(MAX_KEYS + 1)))
    done, _ = run(tmp_path, "--config", str(config), "ls", str(tmp_path))
    assert done.returncode == 2
    assert f"more than {MAX_KEYS:,} keys and tables" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
