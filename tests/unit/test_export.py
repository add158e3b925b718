"""Incident files: names, never overwriting, private modes, whole or not at all."""

from __future__ import annotations

import errno
import os
import stat
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from lockwatch.actions import export
from lockwatch.actions.export import file_stem, write_incident
from lockwatch.model.incident import Incident, capture, to_json, to_markdown
from tests.conftest import LOCAL_HOST, NOW
from tests.unit.test_incident import busy_board

STEM = "lockwatch-incident-20261121T120000Z"


@pytest.fixture
def incident() -> Incident:
    return capture(busy_board(), NOW, LOCAL_HOST)


def listing(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_writes_json_and_markdown_side_by_side(tmp_path: Path, incident: Incident) -> None:
    json_path, md_path = write_incident(incident, tmp_path)
    assert (json_path, md_path) == (tmp_path / f"{STEM}.json", tmp_path / f"{STEM}.md")
    assert json_path.read_bytes() == to_json(incident)
    assert md_path.read_text(encoding="utf-8") == to_markdown(incident)
    assert orjson.loads(json_path.read_bytes())["schema"] == "lockwatch.incident/1"
    assert listing(tmp_path) == [f"{STEM}.json", f"{STEM}.md"]  # no temporary files left


def test_files_are_private_whatever_the_umask(tmp_path: Path, incident: Incident) -> None:
    old = os.umask(0o000)
    try:
        paths = write_incident(incident, tmp_path)
    finally:
        os.umask(old)
    for path in paths:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.stat().st_nlink == 1  # the temporary link is gone


def test_stem_is_the_snapshot_time_in_utc() -> None:
    from datetime import timezone

    at = NOW.astimezone(timezone(timedelta(hours=-5)))
    moved = Incident(at, LOCAL_HOST, (), (), (), (), (), ())
    assert file_stem(moved) == STEM


def test_never_overwrites_a_report_of_the_same_second(tmp_path: Path, incident: Incident) -> None:
    first = write_incident(incident, tmp_path)
    second = write_incident(incident, tmp_path)
    third = write_incident(incident, tmp_path)
    assert [p.name for p in (*second, *third)] == [
        f"{STEM}-2.json", f"{STEM}-2.md", f"{STEM}-3.json", f"{STEM}-3.md",
    ]  # fmt: skip
    assert len(set(first + second + third)) == 6
    assert len(listing(tmp_path)) == 6


@pytest.mark.parametrize("taken", [f"{STEM}.json", f"{STEM}.md"])
def test_either_name_taken_moves_both_on(tmp_path: Path, incident: Incident, taken: str) -> None:
    (tmp_path / taken).write_text("someone else's")
    json_path, md_path = write_incident(incident, tmp_path)
    assert (json_path.name, md_path.name) == (f"{STEM}-2.json", f"{STEM}-2.md")
    assert (tmp_path / taken).read_text() == "someone else's"


def test_a_dangling_symlink_counts_as_taken(tmp_path: Path, incident: Incident) -> None:
    (tmp_path / f"{STEM}.json").symlink_to(tmp_path / "elsewhere")
    json_path, _ = write_incident(incident, tmp_path)
    assert json_path.name == f"{STEM}-2.json"
    assert not (tmp_path / "elsewhere").exists()


def test_a_name_taken_between_looking_and_writing(
    tmp_path: Path, incident: Incident, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another lockwatch wins the race for the Markdown name: ours moves on, and the
    JSON already written under the lost name is taken back."""
    real = export._publish
    raced = False

    def racing(data: bytes, path: Path) -> None:
        nonlocal raced
        if path.name == f"{STEM}.md" and not raced:
            raced = True
            path.write_text("theirs")
        real(data, path)

    monkeypatch.setattr(export, "_publish", racing)
    json_path, md_path = write_incident(incident, tmp_path)
    assert (json_path.name, md_path.name) == (f"{STEM}-2.json", f"{STEM}-2.md")
    assert (tmp_path / f"{STEM}.md").read_text() == "theirs"
    assert not (tmp_path / f"{STEM}.json").exists()
    assert listing(tmp_path) == [f"{STEM}-2.json", f"{STEM}-2.md", f"{STEM}.md"]


def test_a_missing_directory_is_made_private(tmp_path: Path, incident: Incident) -> None:
    missing = tmp_path / "state" / "incidents"
    json_path, _ = write_incident(incident, missing)
    assert json_path.parent == missing
    assert missing.stat().st_mode & 0o777 == 0o700


def test_a_directory_that_cannot_be_made_raises_with_its_path(
    tmp_path: Path, incident: Incident
) -> None:
    (tmp_path / "a-file").write_text("")
    impossible = tmp_path / "a-file" / "nowhere"
    with pytest.raises(NotADirectoryError) as raised:
        write_incident(incident, impossible)
    assert str(impossible) in str(raised.value)


def test_a_failed_write_leaves_nothing_behind(
    tmp_path: Path, incident: Incident, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up while writing the Markdown: the JSON goes too."""
    real_fsync = os.fsync
    calls = 0

    def full(fd: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_incident(incident, tmp_path)
    assert listing(tmp_path) == []


def test_filesystem_without_hard_links(
    tmp_path: Path, incident: Incident, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: object, target: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    first = write_incident(incident, tmp_path)
    second = write_incident(incident, tmp_path)
    assert [p.name for p in second] == [f"{STEM}-2.json", f"{STEM}-2.md"]
    for path in (*first, *second):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert first[0].read_bytes() == to_json(incident)
    assert len(listing(tmp_path)) == 4


def test_too_many_reports_in_one_second(
    tmp_path: Path, incident: Incident, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "MAX_SUFFIX", 2)
    write_incident(incident, tmp_path)
    write_incident(incident, tmp_path)
    with pytest.raises(FileExistsError, match="already exist"):
        write_incident(incident, tmp_path)
    assert len(listing(tmp_path)) == 4
