"""The audit log: append, hash chain, sequence, head, mode 0600, unwritable logs,
tamper detection by `verify`, concurrent writers, and who the operator is."""

from __future__ import annotations

import getpass
import itertools
import json
import multiprocessing
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockwatch.actions import audit
from lockwatch.actions.audit import (
    GENESIS,
    INTENT,
    AuditError,
    AuditKey,
    AuditLog,
    Operator,
    head_path,
    read_records,
    record_hash,
    verify,
)
from lockwatch.clock import FrozenClock
from tests.conftest import NOW

OPERATOR = Operator(name="alice", os_user="root", sudo_user="alice")


def make_log(path: Path, clock: FrozenClock | None = None) -> AuditLog:
    return AuditLog(path, clock=clock or FrozenClock(NOW), host="testhost", operator=OPERATOR)


def fill(path: Path, count: int = 5) -> list[dict[str, Any]]:
    log = make_log(path)
    return [
        log.append(
            "lock_broken" if n % 2 else INTENT,
            {"action_id": f"a{n}", "reason": f"reason {n}", "target": {"path": f"/l/{n}.lock"}},
        )
        for n in range(1, count + 1)
    ]


def legacy_log(path: Path, count: int) -> list[dict[str, Any]]:
    """A log as lockwatch wrote it before keys: sha256 chain and head, no MAC."""
    records: list[dict[str, Any]] = []
    prev = GENESIS
    with open(path, "wb") as handle:
        for seq in range(1, count + 1):
            record: dict[str, Any] = {"seq": seq, "event": "lock_broken", "reason": f"r{seq}"}
            record["prev_hash"] = prev
            record["hash"] = prev = record_hash(record)
            handle.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
            records.append(record)
    head_path(path).write_text(json.dumps({"seq": count, "hash": prev}))
    return records


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write_lines(path: Path, new: list[bytes]) -> None:
    path.write_bytes(b"".join(new))


@pytest.fixture(autouse=True)
def own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key lives in the user config directory: this test's own."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "audit.jsonl"


# ----------------------------------------------------------------------------- appending


def test_append_builds_a_chain_with_seq_and_head(log_path: Path) -> None:
    records = fill(log_path, 4)
    assert [r["seq"] for r in records] == [1, 2, 3, 4]
    assert records[0]["prev_hash"] == GENESIS
    for before, after in itertools.pairwise(records):
        assert after["prev_hash"] == before["hash"]
    for record in records:
        assert record["hash"] == record_hash(record)
        assert record["hash"].startswith("sha256:") and len(record["hash"]) == 7 + 64
    head = json.loads(head_path(log_path).read_bytes())
    assert (head["seq"], head["hash"]) == (4, records[-1]["hash"])
    assert head["key_id"] == records[-1]["key_id"] and head["mac"].startswith("hmac-sha256:")
    assert head_path(log_path).name == "audit.jsonl.head"


def test_records_carry_who_where_when(log_path: Path) -> None:
    clock = FrozenClock(NOW)
    record = make_log(log_path, clock).append("lock_broken", {"reason": "r"})
    assert record["time"] == "2026-11-21T12:00:00.000000Z"
    assert record["event"] == "lock_broken"
    assert record["operator"] == "alice"
    assert record["os_user"] == "root"
    assert record["sudo_user"] == "alice"
    assert record["host"] == "testhost"
    assert record["lockwatch_pid"] == os.getpid()
    clock.advance(90)
    later = make_log(log_path, clock).append("lock_stolen", {})
    assert later["time"] == "2026-11-21T12:01:30.000000Z"


def test_records_survive_a_new_reader(log_path: Path) -> None:
    """What append returned is what is on disk, line for line (fsync is not testable,
    but nothing is kept in memory only)."""
    records = fill(log_path, 3)
    on_disk = [record for _, record, _ in read_records(log_path)]
    assert on_disk == records
    # A second writer (a new process, say) continues the same chain.
    more = make_log(log_path).append("lock_released", {})
    assert more["seq"] == 4 and more["prev_hash"] == records[-1]["hash"]
    assert verify(log_path).ok


def test_fields_are_made_json(log_path: Path) -> None:
    record = make_log(log_path).append(
        "lock_broken",
        {"at": NOW, "raw": b"\xffpid", "nested": {1: ("a", NOW)}},
    )
    assert record["at"] == "2026-11-21T12:00:00.000000Z"
    assert record["raw"] == "\\xffpid"
    assert record["nested"] == {"1": ["a", "2026-11-21T12:00:00.000000Z"]}
    assert verify(log_path).ok


def test_text_that_is_not_utf8_is_escaped_not_fatal(log_path: Path) -> None:
    """A lock file named with non-UTF-8 bytes (or such a --reason) reaches Python as
    lone surrogates; the record must still be written (it used to raise
    UnicodeEncodeError and crash the CLI)."""
    name = os.fsdecode(b"/locks/c\xff.pid")
    operator = Operator(name=os.fsdecode(b"bob\xfe"), os_user="root", sudo_user=None)
    log = AuditLog(log_path, clock=FrozenClock(NOW), host="h", operator=operator)
    record = log.append("lock_broken", {"target": {"path": name}, os.fsdecode(b"k\xfa"): "v"})
    assert record["target"]["path"] == "/locks/c\\xff.pid"
    assert record["operator"] == "bob\\xfe"
    assert record["k\\xfa"] == "v"
    assert verify(log_path).ok


def test_log_and_head_are_mode_0600_and_dir_0700(log_path: Path) -> None:
    fill(log_path, 1)
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(head_path(log_path).stat().st_mode) == 0o600
    assert stat.S_IMODE(log_path.parent.stat().st_mode) == 0o700


def test_an_open_log_is_tightened_to_0600(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"")
    path.chmod(0o644)
    fill(path, 1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_default_path_is_under_the_user_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    assert audit.default_path() == tmp_path / "xdg-state" / "lockwatch" / "audit.jsonl"


def test_a_cut_short_last_line_does_not_swallow_the_next_record(log_path: Path) -> None:
    """A writer that died mid-line leaves no newline; the next record must still
    stand on its own line, and mark the torn one so verify knows it for a crash."""
    fill(log_path, 2)
    torn = b'{"seq":3,"time":"2026-'
    with open(log_path, "ab") as handle:
        handle.write(torn)
    before = verify(log_path)
    assert before.ok and before.status == "torn" and before.records == 2
    assert any("torn by a crash" in note for note in before.notes)
    record = make_log(log_path).append("lock_broken", {"reason": "after the crash"})
    assert record["seq"] == 3 and record["torn_before"]["bytes"] == len(torn)
    parsed = list(read_records(log_path))
    assert parsed[-1][1] == record
    assert parsed[2][1] is None and parsed[2][2] == torn  # the torn line, alone, kept
    result = verify(log_path)
    assert result.ok and result.status == "intact" and result.records == 3, result
    assert any("line 3 was torn by a crash" in note for note in result.notes)


def test_a_damaged_last_line_stays_the_first_bad_record(log_path: Path) -> None:
    fill(log_path, 3)
    content = lines(log_path)
    content[-1] = b"garbage\n"
    write_lines(log_path, content)
    make_log(log_path).append("lock_broken", {})
    result = verify(log_path)
    assert not result.ok and result.line == 3


# ----------------------------------------------------------------------------- unwritable


def test_a_directory_made_by_another_writer_meanwhile_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two lockwatches making the audit directory at once: the one that finds it
    made between its look and its mkdir used to refuse ("is not a directory")."""
    state = tmp_path / "state"
    real_is_dir = Path.is_dir

    def made_meanwhile(self: Path) -> bool:
        if self == state and not real_is_dir(self):
            self.mkdir()  # the other writer, just now
            return False
        return real_is_dir(self)

    monkeypatch.setattr(Path, "is_dir", made_meanwhile)
    assert make_log(state / "audit.jsonl").append("lock_broken", {})["seq"] == 1


def test_parent_is_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a directory")
    with pytest.raises(AuditError, match="cannot open the audit log"):
        make_log(tmp_path / "state" / "audit.jsonl").append("lock_broken", {})
    assert (tmp_path / "state").read_text() == "not a directory"


def test_log_path_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "audit.jsonl").mkdir()
    with pytest.raises(AuditError):
        make_log(tmp_path / "audit.jsonl").append("lock_broken", {})
    assert list((tmp_path / "audit.jsonl").iterdir()) == []


def test_log_path_is_a_symlink(tmp_path: Path) -> None:
    """O_NOFOLLOW: never written through a link, even to a perfectly good file."""
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(b"")
    link = tmp_path / "audit.jsonl"
    link.symlink_to(target)
    with pytest.raises(AuditError, match="symlink"):
        make_log(link).append("lock_broken", {})
    assert target.read_bytes() == b""
    assert link.is_symlink()
    assert not head_path(link).exists()


def test_dangling_symlink_is_not_created_through(tmp_path: Path) -> None:
    link = tmp_path / "audit.jsonl"
    link.symlink_to(tmp_path / "created-by-link.jsonl")
    with pytest.raises(AuditError):
        make_log(link).append("lock_broken", {})
    assert not (tmp_path / "created-by-link.jsonl").exists()


def test_a_fifo_is_not_a_log(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    os.mkfifo(path)
    with pytest.raises(AuditError):
        make_log(path).append("lock_broken", {})


# ----------------------------------------------------------------------------- verify


def test_verify_ok(log_path: Path) -> None:
    fill(log_path, 6)
    result = verify(log_path)
    assert result.ok and result.records == 6 and result.problem is None


def test_verify_an_empty_log_without_a_head(tmp_path: Path) -> None:
    """lockwatch writes the head before the log: an empty log with no head was
    emptied, not "0 records, chain intact"."""
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"")
    result = verify(path)
    assert not result.ok and result.status == "tampered"
    assert result.problem is not None and "emptied" in result.problem


def test_a_new_log_gets_its_head_first(log_path: Path) -> None:
    fill(log_path, 1)
    log_path.write_bytes(b"")  # as if it had been created and not yet written
    head_path(log_path).unlink()
    make_log(log_path.with_name("other.jsonl")).append("lock_broken", {})
    other = log_path.with_name("other.jsonl")
    assert json.loads(head_path(other).read_bytes())["seq"] == 1
    assert verify(other).ok


def test_edit_a_field_of_a_middle_record(log_path: Path) -> None:
    fill(log_path, 5)
    content = lines(log_path)
    content[2] = content[2].replace(b"reason 3", b"reason X")
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok
    assert (result.line, result.seq, result.records) == (3, 3, 2)
    assert result.problem is not None and "edited" in result.problem


def test_edit_with_a_recomputed_hash_is_named_at_the_edited_record(log_path: Path) -> None:
    """Keyed: the edited record's MAC gives it away, whatever hash it carries."""
    fill(log_path, 5)
    content = lines(log_path)
    record = json.loads(content[2])
    record["reason"] = "nothing to see"
    record["hash"] = record_hash(record)
    content[2] = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and (result.line, result.seq) == (3, 3)
    assert result.problem is not None and "MAC" in result.problem


def test_an_unkeyed_edit_with_a_recomputed_hash_is_named_at_the_edited_record(
    tmp_path: Path,
) -> None:
    """Unkeyed (a log from before keys): record 4 still names record 3's original
    hash, so record 3 is the one that was edited, not record 4."""
    path = tmp_path / "old.jsonl"
    legacy_log(path, 5)
    content = lines(path)
    record = json.loads(content[2])
    record["reason"] = "nothing to see"
    record["hash"] = record_hash(record)
    content[2] = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    write_lines(path, content)
    result = verify(path)
    assert not result.ok and (result.line, result.seq) == (3, 3), result
    assert result.problem is not None and "record 4 still names its original hash" in result.problem


def test_same_content_other_bytes_is_an_edit(log_path: Path) -> None:
    """Re-serialised with spaces: the same JSON, not the same bytes."""
    fill(log_path, 3)
    content = lines(log_path)
    content[1] = (json.dumps(json.loads(content[1])) + "\n").encode()
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and (result.line, result.seq) == (2, 2)


def test_delete_a_middle_record(log_path: Path) -> None:
    fill(log_path, 5)
    content = lines(log_path)
    del content[2]
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and (result.line, result.seq) == (3, 4)
    assert result.problem is not None and "record 3 removed" in result.problem


def test_delete_two_middle_records(log_path: Path) -> None:
    fill(log_path, 6)
    content = lines(log_path)
    del content[1:3]
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and result.line == 2
    assert result.problem is not None and "records 2-3 removed" in result.problem


def test_delete_the_first_record(log_path: Path) -> None:
    fill(log_path, 3)
    write_lines(log_path, lines(log_path)[1:])
    result = verify(log_path)
    assert not result.ok and (result.line, result.seq) == (1, 2)


def test_delete_the_last_record(log_path: Path) -> None:
    """The chain of what is left is intact: only the head can tell."""
    fill(log_path, 5)
    write_lines(log_path, lines(log_path)[:-1])
    result = verify(log_path)
    assert not result.ok
    assert result.seq == 5 and result.records == 4
    assert result.problem is not None and "record 5 removed from the end" in result.problem


def test_delete_the_last_records(log_path: Path) -> None:
    fill(log_path, 5)
    write_lines(log_path, lines(log_path)[:-2])
    result = verify(log_path)
    assert not result.ok and result.seq == 4
    assert result.problem is not None and "records 4-5 removed" in result.problem


def test_empty_the_whole_log(log_path: Path) -> None:
    fill(log_path, 3)
    log_path.write_bytes(b"")
    result = verify(log_path)
    assert not result.ok and result.seq == 1


def test_swap_two_records(log_path: Path) -> None:
    fill(log_path, 5)
    content = lines(log_path)
    content[1], content[2] = content[2], content[1]
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and result.line == 2 and result.records == 1
    assert result.problem is not None and "record 2 removed or moved" in result.problem


def test_move_a_record_back(log_path: Path) -> None:
    fill(log_path, 5)
    content = lines(log_path)
    content.insert(1, content.pop(3))
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and result.line == 2


def test_duplicate_a_record(log_path: Path) -> None:
    fill(log_path, 3)
    content = lines(log_path)
    content.insert(2, content[1])
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and result.line == 3
    assert result.problem is not None and "out of order" in result.problem


def test_corrupt_a_line(log_path: Path) -> None:
    fill(log_path, 4)
    content = lines(log_path)
    content[1] = content[1][:40] + b"\n"
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and result.line == 2 and result.seq is None
    assert result.problem is not None and "not a JSON record" in result.problem


def test_a_blank_line_is_damage(log_path: Path) -> None:
    fill(log_path, 2)
    content = lines(log_path)
    content.insert(1, b"\n")
    write_lines(log_path, content)
    result = verify(log_path)
    assert not result.ok and result.line == 2


def test_delete_the_head(log_path: Path) -> None:
    fill(log_path, 3)
    head_path(log_path).unlink()
    result = verify(log_path)
    assert not result.ok and result.records == 3
    assert result.problem is not None and "head file" in result.problem


def test_damage_the_head(log_path: Path) -> None:
    fill(log_path, 3)
    head_path(log_path).write_text("{nope")
    assert not verify(log_path).ok


def test_head_pointing_elsewhere(log_path: Path) -> None:
    records = fill(log_path, 3)
    head_path(log_path).write_text(json.dumps({"seq": 3, "hash": records[0]["hash"]}))
    assert not verify(log_path).ok


def test_the_last_newline_removed(log_path: Path) -> None:
    fill(log_path, 3)
    log_path.write_bytes(log_path.read_bytes()[:-1])
    result = verify(log_path)
    assert not result.ok and (result.line, result.seq) == (3, 3)


# ------------------------------------------------------------------- fuzz: any edit is seen


FUZZ_SECRET = b"0123456789abcdef0123456789abcdef"


def _pristine() -> tuple[bytes, bytes, AuditKey]:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "audit.jsonl"
        log = make_log(path)
        # Built at import: no key file of this test run to use.
        key = log._key = AuditKey(Path(scratch) / "fuzz.key", FUZZ_SECRET)
        log.append(INTENT, {"reason": "ünïcode ✓", "previous_lock": {"pid": 12, "n": 1.5}})
        log.append("lock_broken", {"reason": "x", "previous_lock": "12 host\n", "ok": True})
        log.append("action_refused", {"reason": "y", "code": None, "list": [1, "2", None]})
        log.append("lock_stolen", {"reason": "z", "target": {"id": "file:/a b/c.lock"}})
        return path.read_bytes(), head_path(path).read_bytes(), key


PRISTINE, PRISTINE_HEAD, FUZZ_KEY = _pristine()


@pytest.fixture(scope="module")
def fuzz_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as scratch:
        yield Path(scratch)


def _install(directory: Path, log: bytes) -> Path:
    path = directory / "audit.jsonl"
    path.write_bytes(log)
    head_path(path).write_bytes(PRISTINE_HEAD)
    return path


def test_the_pristine_fuzz_log_verifies(fuzz_dir: Path) -> None:
    assert verify(_install(fuzz_dir, PRISTINE), key=FUZZ_KEY).ok


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    position=st.integers(min_value=0, max_value=len(PRISTINE) - 1),
    byte=st.integers(min_value=0, max_value=255),
)
def test_any_single_byte_edit_is_detected(fuzz_dir: Path, position: int, byte: int) -> None:
    if PRISTINE[position] == byte:
        byte = (byte + 1) % 256
    edited = PRISTINE[:position] + bytes([byte]) + PRISTINE[position + 1 :]
    assert not verify(_install(fuzz_dir, edited), key=FUZZ_KEY).ok


@settings(max_examples=100, deadline=None)
@given(position=st.integers(min_value=0, max_value=len(PRISTINE) - 1))
def test_any_single_byte_removal_is_detected(fuzz_dir: Path, position: int) -> None:
    edited = PRISTINE[:position] + PRISTINE[position + 1 :]
    assert not verify(_install(fuzz_dir, edited), key=FUZZ_KEY).ok


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_any_line_removal_is_detected(fuzz_dir: Path, data: st.DataObject) -> None:
    content = PRISTINE.splitlines(keepends=True)
    gone = data.draw(
        st.sets(st.integers(min_value=0, max_value=len(content) - 1), min_size=1), label="lines"
    )
    edited = b"".join(line for n, line in enumerate(content) if n not in gone)
    assert not verify(_install(fuzz_dir, edited), key=FUZZ_KEY).ok


# ----------------------------------------------------------------------------- concurrency


def _append_many(path: str, count: int, barrier: Any) -> None:
    log = make_log(Path(path))
    barrier.wait()
    for n in range(count):
        log.append("lock_broken", {"writer": os.getpid(), "n": n})


def test_concurrent_appends_keep_one_unbroken_chain(log_path: Path) -> None:
    writers, each = 4, 25
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(writers)
    procs = [
        context.Process(target=_append_many, args=(str(log_path), each, barrier))
        for _ in range(writers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    result = verify(log_path)
    assert result.ok, result
    assert result.records == writers * each
    records = [record for _, record, _ in read_records(log_path)]
    assert [r["seq"] for r in records if r] == list(range(1, writers * each + 1))
    by_writer: dict[int, list[int]] = {}
    for record in records:
        assert record is not None
        by_writer.setdefault(record["writer"], []).append(record["n"])
        assert record["lockwatch_pid"] == record["writer"]
    assert len(by_writer) == writers
    assert all(ns == list(range(each)) for ns in by_writer.values())
    assert json.loads(head_path(log_path).read_bytes())["seq"] == writers * each


def test_verify_while_others_append_never_cries_wolf(log_path: Path) -> None:
    """An append writes the record, then the head: a verify in between must not
    see a log that ends past its head (a false alarm)."""
    fill(log_path, 1)
    writers, each = 2, 50
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(writers + 1)
    procs = [
        context.Process(target=_append_many, args=(str(log_path), each, barrier))
        for _ in range(writers)
    ]
    for proc in procs:
        proc.start()
    barrier.wait()
    checks = []
    while any(proc.is_alive() for proc in procs):
        checks.append(verify(log_path))
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    checks.append(verify(log_path))
    assert checks[-1].records == 1 + writers * each
    assert [c for c in checks if not c.ok] == []


# ----------------------------------------------------------------------------- operator


def test_operator_is_the_os_user_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: "carol")
    assert Operator.identify(environ={}) == Operator("carol", "carol", None)


def test_operator_behind_sudo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: "root")
    assert Operator.identify(environ={"SUDO_USER": "dave"}) == Operator("dave", "root", "dave")


def test_operator_explicit_name_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: "root")
    found = Operator.identify("  oncall-erin ", environ={"SUDO_USER": "dave"})
    assert found == Operator("oncall-erin", "root", "dave")


def test_operator_blank_names_fall_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(getpass, "getuser", lambda: "root")
    assert Operator.identify("   ", environ={"SUDO_USER": ""}) == Operator("root", "root", None)


def test_operator_without_a_passwd_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_user() -> str:
        raise KeyError("getpwuid(): uid not found")

    monkeypatch.setattr(getpass, "getuser", no_user)
    found = Operator.identify(environ={})
    assert found.os_user == str(os.getuid()) and found.name == found.os_user


def test_operator_from_the_real_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUDO_USER", "frank")
    assert Operator.identify().sudo_user == "frank"
    assert Operator.identify().name == "frank"
