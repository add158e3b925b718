"""LibreOffice's `.~lock.<name>#` files, as lockwatch reads them.

LibreOffice is not installed here, so every lock is a byte-for-byte imitation of
what DocumentLockFile::WriteEntryToStream writes: one entry
`OOOUSERNAME,SYSUSERNAME,LOCALHOST,EDITTIME,USERURL;` in UTF-8, `\\`, `,` and `;`
escaped with a backslash, no newline. It records no pid and never expires, so a
live and a crashed holder write the same bytes: held (with `no_pid`) either way;
another host's lock says `foreign_host`. What LibreOffice cannot parse it shows
as a corrupt lock: invalid here.
"""

from __future__ import annotations

import getpass
import socket
from pathlib import Path

import pytest

from tests.formats.common import codes, file_records, record, run_ls

HOST = socket.gethostname()
USER = getpass.getuser()
PROFILE = f"file:///home/{USER}/.config/libreoffice/4"


def lo_lock(directory: Path, document: str, raw: bytes) -> Path:
    (directory / document).write_bytes(b"PK\x03\x04")
    lock = directory / f".~lock.{document}#"
    lock.write_bytes(raw)
    return lock


def test_this_hosts_lock_is_held_with_no_pid(tmp_path: Path) -> None:
    raw = f"Erin Doe,{USER},{HOST},24.11.2026 03:00,{PROFILE};".encode()
    lo_lock(tmp_path, "report.odt", raw)
    rec = record(tmp_path, ".~lock.report.odt#")
    assert rec is not None
    assert (rec["format"], rec["name"], rec["state"], codes(rec)) == (
        "libreoffice",
        "report.odt",
        "active",
        ["no_pid"],
    )
    assert (rec["holder"]["pid"], rec["holder"]["host"], rec["holder"]["actor"]) == (
        None,
        HOST,
        USER,
    )


def test_escapes_and_utf8(tmp_path: Path) -> None:
    raw = f"Doe\\, Jöhn\\;\\\\,jdoe,{HOST},01.02.2026 09:05,{PROFILE};"
    lo_lock(tmp_path, "b, c.ods", raw.encode())
    rec = record(tmp_path, ".~lock.b, c.ods#")
    assert rec is not None
    assert (rec["state"], rec["name"], rec["holder"]["actor"]) == ("active", "b, c.ods", "jdoe")


def test_other_host(tmp_path: Path) -> None:
    raw = b"Alice,alice,laptop.example.org,24.11.2026 03:00,file:///C:/Users/alice/AppData/x;"
    lo_lock(tmp_path, "report.odt", raw)
    rec = record(tmp_path, ".~lock.report.odt#")
    assert rec is not None
    assert (rec["state"], codes(rec)) == ("active", ["no_pid", "foreign_host"])
    assert rec["holder"]["host"] == "laptop.example.org"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"Erin,erin,vm,24.11.2026 03:00",  # truncated: no `;`
        b"Erin,erin,vm;",  # too few fields
        b"Erin\\x,erin,vm,24.11.2026 03:00,file:///x;",  # an escape LibreOffice rejects
        b"\xff\xfe,erin,vm,t,u;",  # not UTF-8
        b"\x00" * 64,
        b"a" * 40000,  # LibreOffice rejects a lock file this large
    ],
)
def test_bad_entries_are_invalid(tmp_path: Path, raw: bytes) -> None:
    lo_lock(tmp_path, "report.odt", raw)
    rec = record(tmp_path, ".~lock.report.odt#")
    assert rec is not None
    assert (rec["format"], rec["state"], codes(rec)) == (
        "libreoffice",
        "invalid",
        ["unparseable"],
    )


def test_only_lock_names_are_listed(tmp_path: Path) -> None:
    (tmp_path / ".~lock.#").write_bytes(b"x")
    (tmp_path / "report.odt#").write_bytes(b"x")
    (tmp_path / ".~lock.dir#").mkdir()
    assert file_records(run_ls(tmp_path).locks) == []
