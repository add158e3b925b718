"""A scan offers an entry only to the tools' formats whose CLAIMS it meets
(decoders.dispatch): no format may claim an entry it is not offered, or that
entry's verdict would change. Checked against every format's own `read` over
names and bytes of every format (and their near misses), in the places the
formats look at, and over hypothesis' names and bytes built from the same parts."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockwatch.sources.files.decoders import NATIVE, decode_native, sqlite, vim_swap
from lockwatch.sources.files.decoders.base import STRIPPED_LEADS, Claims, LockFile
from lockwatch.sources.files.decoders.dispatch import Dispatch

DISPATCH = Dispatch(NATIVE)

# Places formats look at (the directory a name is put in).
PLACES = (
    "",
    ".git",
    "repo.git",
    ".git/refs/heads",
    ".git/modules/sub",
    ".hg",
    ".hg/store",
    "var/lib/dpkg",
    "var/lib/apt/lists",
    "var/cache/apt/archives",
    "var/lib/pacman",
    "var/lib/rpm",
    "db",
    ".cargo",
    "proj/.loops/.running",
    "proj/.loops/.queue",
    "agents/sessions",
    "tmp/clawdbot-1000",
    "logs/locks",
    ".GITCLAW/state/locks",
)
NAMES = (
    "x.lock",
    ".lock",
    "x.pid",
    "gc.pid",
    "index.lock",
    "next-index-123.lock",
    "wlock",
    "lock",
    "lock-frontend",
    "LOCK",
    "db.lck",
    ".rpm.lock",
    ".package-cache",
    ".package-cache-mutate",
    ".terraform.tfstate.lock.info",
    ".other.lock.info",
    "db.sqlite",
    "db.sqlite-wal",
    "db.sqlite-shm",
    "db.sqlite-journal",
    ".acquire.lock",
    "loop-20250101T101010.pid",
    "entry.json",
    "a.jsonl.lock",
    "gateway.0123abcd.lock",
    ".#notes.txt",
    ".~lock.doc.odt#",
    ".notes.txt.swp",
    ".notes.txt.sab",
    "%home%me%notes.txt.swo",
    "x.lock.12345",
    "host.example-1f0-77.lock",
    "plain",
    "LCK..ttyS0",
)


def _vim_header() -> bytes:
    head = b"b0VIM 9.0\x00\x00\x00"
    return head + b"\x00" * (vim_swap._BLOCK0_BYTES - len(head))


CONTENTS = (
    b"",
    b"0",
    b"0\n",
    b"1\n",
    b" 1234\n",
    b" host:1234\n",
    b"1234\n",
    b"1234\nhost\n",
    b"1234\nhost\n5678\n",
    " \u30001234\nhost\n".encode(),
    "\u20011234\nhost\n".encode(),
    b"1\nfilelock-strict-v1\x00\n0\n",
    b"/r/x.lock|host|1234|5678\n",
    b"x.lock|host|1234|5678",
    b"  /r/x.lock|host|1234|5678  \n",
    b"me@host.1234:99\n",
    b"me,me,host,01.01.2025 10:10,file:///home/me/.config;\n",
    b"{}",
    b'{"pid": 1234, "createdAt": "2025-01-01T00:00:00Z"}',
    b'{"pid": 1234, "createdAt": "2025-01-01T00:00:00Z", "configPath": "/c"}',
    b'{"ID": "x", "Operation": "OperationTypeApply", "Who": "me@host"}',
    b'{"pid": 1234, "enqueuedAt": "2025-01-01T00:00:00Z", "loop_name": "l"}',
    b"[1, 2]",
    b"0123456789abcdef0123456789abcdef01234567\n",
    sqlite.MAGIC + b"\x00" * 100,
    b"\x37\x7f\x06\x82" + b"\x00" * 28,
    b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7" + b"\x00" * 20,
    _vim_header(),
    b"\xff\xfe\x00garbage",
)
TARGETS = (None, "me@host.1234:99", "host.1a2b30-1234", "x", "/r/x.lock|host|1|2")
ENTRIES = ((), ("host.1a2b3c0-1234",), ("pid",), ("a", "b"))


def _reference(file: LockFile) -> object:
    """What trying every format in turn reads: the scan before the table."""
    for module in NATIVE:
        lock = module.read(file)
        if lock is not None:
            return lock
    return None


def _check(file: LockFile) -> None:
    offered = DISPATCH.offered(file)
    for module in NATIVE:
        if module.read(file) is not None:
            assert module in offered, f"{module.FORMAT} claims {file!r} but is not offered it"
    assert list(offered) == [m for m in NATIVE if m in offered]  # NATIVE's order kept
    assert decode_native(file) == _reference(file)


def _files(root: Path) -> list[LockFile]:
    files = []
    for place, name in itertools.product(PLACES, NAMES):
        path = f"{root}/{place}/{name}" if place else f"{root}/{name}"
        for raw in CONTENTS:
            for nlink, links in ((1, ()), (2, ("host.example-1f0-77.1234",))):
                files.append(LockFile(path, raw, 0.0, None, nlink=nlink, links=links))
        for target in TARGETS:
            files.append(LockFile(path, b"", 0.0, None, kind="symlink", target=target))
        for entries in ENTRIES:
            files.append(LockFile(path, b"", 0.0, None, kind="dir", entries=entries))
    return files


def test_every_claim_is_offered_in_every_place(tmp_path: Path) -> None:
    # A database beside its -wal/-shm/-journal: sqlite claims those only then.
    for place in PLACES:
        (tmp_path / place).mkdir(parents=True, exist_ok=True)
        (tmp_path / place / "db.sqlite").write_bytes(sqlite.MAGIC + b"\x00" * 100)
    files = _files(tmp_path)
    claimed = {type(decode_native(file)).__name__ for file in files}
    assert claimed == {"Lock", "NoneType"}
    formats = {lock.format for file in files if (lock := decode_native(file)) is not None}
    # The corpus reaches every format, or the check above proves little.
    assert formats >= {module.FORMAT for module in NATIVE}
    for file in files:
        _check(file)


_PARTS = st.sampled_from(
    sorted(
        {
            *NAMES,
            *(text for m in NATIVE for text in m.CLAIMS.names),
            *(text for m in NATIVE for text in m.CLAIMS.suffixes[:40]),
            *(text for m in NATIVE for text in m.CLAIMS.prefixes),
            ".",
            "#",
            "-",
            "x",
            "\n",
            "é",
        }
    )
)
_LEADS = st.sampled_from([bytes([b]) for b in range(256)] + ["\u3000".encode(), b"\xc2\x85"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    place=st.sampled_from(PLACES),
    parts=st.lists(_PARTS, min_size=1, max_size=3),
    lead=_LEADS,
    rest=st.sampled_from(CONTENTS),
    kind=st.sampled_from(("file", "symlink", "dir")),
)
def test_generated_names_and_bytes(
    place: str, parts: list[str], lead: bytes, rest: bytes, kind: str
) -> None:
    name = "".join(parts).replace("/", "_") or "x"
    path = f"/nowhere/{place}/{name}" if place else f"/nowhere/{name}"
    raw = lead + rest if kind == "file" else b""
    _check(LockFile(path, raw, 0.0, None, kind=kind, target=rest.decode("latin-1") or None))


def test_a_format_that_declares_nothing_is_offered_everything() -> None:
    anything = ModuleType("anything")  # a format module without CLAIMS
    named = ModuleType("named")
    named.CLAIMS = Claims(names=frozenset({"y.lock"}))  # type: ignore[attr-defined]
    table = Dispatch([named, anything])
    for kind in ("file", "symlink", "dir"):
        assert table.offered(LockFile("/a/b", b"", 0.0, None, kind=kind)) == (anything,)
    assert table.offered(LockFile("/a/y.lock", b"", 0.0, None)) == (named, anything)


def test_endings_and_beginnings_of_any_length() -> None:
    short = ModuleType("short")  # too short to look up: offered every file
    short.CLAIMS = Claims(suffixes=("#",), prefixes=("~",))  # type: ignore[attr-defined]
    long = ModuleType("long")
    long.CLAIMS = Claims(  # type: ignore[attr-defined]
        suffixes=(".lock", ".jsonl.lock"), prefixes=(".~lock.",), leading=b"{"
    )
    table = Dispatch([short, long])
    assert table.offered(LockFile("/a/b", b"", 0.0, None)) == (short,)
    assert table.offered(LockFile("/a/b", b"", 0.0, None, kind="dir")) == ()
    for name in ("x.lock", "x.jsonl.lock", ".~lock.x#", ".lock"):
        assert table.offered(LockFile(f"/a/{name}", b"", 0.0, None)) == (short, long)
    for name in ("xlock", ".~lock", "x.lock.x", "lock"):
        assert table.offered(LockFile(f"/a/{name}", b"", 0.0, None)) == (short,)
    assert table.offered(LockFile("/a/b", b"{}", 0.0, None)) == (short, long)


def test_stripped_leads_are_every_whitespace_characters_first_byte() -> None:
    spaces = (chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
    assert bytes(sorted({space.encode()[0] for space in spaces})) == STRIPPED_LEADS
