"""The keyed chain and what `verify` says: an HMAC key kept apart from the log,
attacks by someone who can write the log but not read the key (re-chaining,
stripping the MACs, emptying the log), odd heads, old unkeyed logs, and the
syslog anchor."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions import audit
from lockwatch.actions.audit import (
    GENESIS,
    AuditError,
    AuditKey,
    AuditLog,
    Operator,
    head_path,
    read_records,
    record_hash,
    verify,
)
from lockwatch.actions.audit_key import registry_path
from lockwatch.clock import FrozenClock
from tests.conftest import NOW, run_cli

OPERATOR = Operator(name="alice", os_user="root", sudo_user="alice")


@pytest.fixture(autouse=True)
def own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "audit.jsonl"


def make_log(path: Path, **options: Any) -> AuditLog:
    return AuditLog(path, clock=FrozenClock(NOW), host="testhost", operator=OPERATOR, **options)


def fill(path: Path, count: int = 5, **options: Any) -> list[dict[str, Any]]:
    log = make_log(path, **options)
    return [log.append("lock_broken", {"reason": f"reason {n}"}) for n in range(1, count + 1)]


def rechain(path: Path, edit: Any = None, *, strip: bool = False) -> None:
    """What someone who can write the log but not read the key can do: edit, then
    recompute every sha256 and the head (MACs they cannot recompute: kept, or
    stripped)."""
    records = [record for _, record, _ in read_records(path)]
    prev = GENESIS
    out = []
    for record in records:
        assert record is not None
        if edit is not None:
            edit(record)
        if strip:
            record.pop("mac", None)
            record.pop("key_id", None)
        record["prev_hash"] = prev
        record["hash"] = prev = record_hash(record)
        out.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode())
    path.write_bytes(b"\n".join(out) + b"\n")
    head = json.loads(head_path(path).read_bytes())
    head.update(seq=len(records), hash=prev)
    if strip:
        head.pop("mac", None)
        head.pop("key_id", None)
    head_path(path).write_text(json.dumps(head))


def verify_cli(path: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli("audit", "verify", "--audit-log", str(path), *extra)


# ----------------------------------------------------------------------------- the key


def test_records_are_keyed_with_a_key_kept_apart(tmp_path: Path, log_path: Path) -> None:
    records = fill(log_path, 2)
    key_file = tmp_path / "xdg-config" / "lockwatch" / "audit.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert key_file.parent != log_path.parent
    key = AuditKey.load(key_file)
    assert all(r["key_id"] == key.id and r["mac"].startswith("hmac-sha256:") for r in records)
    secret = key_file.read_bytes().strip()
    assert secret not in log_path.read_bytes() and secret not in head_path(log_path).read_bytes()
    assert secret.decode() not in repr(key)
    result = verify(log_path)
    assert result.ok and result.keyed == 2 and result.unkeyed == 0 and result.key_id == key.id


def test_the_key_path_is_configurable(tmp_path: Path, log_path: Path) -> None:
    key_file = tmp_path / "vault" / "lw.key"
    fill(log_path, 1, key_path=key_file)
    assert key_file.exists()
    assert not (tmp_path / "xdg-config" / "lockwatch" / "audit.key").exists()
    assert verify(log_path, key_file=key_file).ok
    assert not verify(log_path).ok  # the default key is not this one
    code, out, _ = verify_cli(log_path, "--audit-key", str(key_file))
    assert code == 0 and "keyed" in out


def test_the_config_names_the_key(tmp_path: Path, log_path: Path) -> None:
    key_file = tmp_path / "vault" / "lw.key"
    fill(log_path, 1, key_path=key_file)
    config = tmp_path / "lockwatch.toml"
    config.write_text(f'[actions]\naudit_log = "{log_path}"\naudit_key = "{key_file}"\n')
    code, out, err = run_cli("audit", "verify", "--config", str(config))
    assert code == 0, err
    assert "1 records, chain intact, keyed" in out


def test_verify_needs_the_key(tmp_path: Path, log_path: Path) -> None:
    fill(log_path, 3)
    key_file = tmp_path / "xdg-config" / "lockwatch" / "audit.key"
    key_file.rename(tmp_path / "elsewhere.key")
    result = verify(log_path)
    assert not result.ok and result.status == "needs_key"
    code, _, err = verify_cli(log_path)
    assert code == 2 and "cannot verify" in err and "record 1 is keyed" in err
    code, _, err = verify_cli(log_path, "--audit-key", str(tmp_path / "none.key"))
    assert code == 2 and "no audit key" in err


def test_another_key_cannot_verify(tmp_path: Path, log_path: Path) -> None:
    fill(log_path, 2)
    other = tmp_path / "other.key"
    other.write_text("f" * 64)
    result = verify(log_path, key_file=other)
    assert result.status == "needs_key" and not result.ok


def test_a_symlinked_or_short_key_is_refused(tmp_path: Path, log_path: Path) -> None:
    real = tmp_path / "real.key"
    real.write_text("a" * 64)
    link = tmp_path / "link.key"
    link.symlink_to(real)
    with pytest.raises(AuditError, match="symlink"):
        fill(log_path, 1, key_path=link)
    short = tmp_path / "short.key"
    short.write_text("abc")
    short.chmod(0o600)
    with pytest.raises(AuditError, match="not a key"):
        fill(log_path, 1, key_path=short)
    assert not log_path.exists()  # nothing audited without a key


def test_a_key_others_could_read_is_refused_not_mended(tmp_path: Path, log_path: Path) -> None:
    """A key others could read may already be in their hands: refused with the
    chmod that closes it (as ssh refuses such a private key), never quietly
    tightened and used (issue 36)."""
    key_file = tmp_path / "k.key"
    key_file.write_text("b" * 64)
    key_file.chmod(0o644)
    with pytest.raises(AuditError, match=f"chmod 600 {key_file}"):
        fill(log_path, 1, key_path=key_file)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o644 and not log_path.exists()


def _make_key(path: str, barrier: Any) -> None:
    barrier.wait()
    print(AuditKey.load_or_create(Path(path)).id, flush=True)


def test_two_processes_making_the_key_at_once_share_it(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "audit.key"
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(4)
    procs = [context.Process(target=_make_key, args=(str(path), barrier)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert len(path.read_text().strip()) == 64
    assert [p.name for p in path.parent.iterdir()] == ["audit.key"]


# -------------------------------------------------------------- attacks without the key


def test_an_edit_rechained_without_the_key_is_named_at_the_edited_record(
    log_path: Path,
) -> None:
    fill(log_path, 5)

    def edit(record: dict[str, Any]) -> None:
        if record["seq"] == 3:
            record["reason"] = "nothing to see"

    rechain(log_path, edit)
    result = verify(log_path)
    assert not result.ok and (result.line, result.seq) == (3, 3), result
    assert result.problem is not None and "without the key" in result.problem
    code, _, err = verify_cli(log_path)
    assert code == 1 and "TAMPERED at record 3, line 3" in err


def test_stripping_every_mac_is_caught(log_path: Path) -> None:
    """Rewritten as if lockwatch had never keyed it: the key's directory knows better."""
    fill(log_path, 4)
    assert registry_path(AuditKey.load(audit.default_key_path())).exists()
    rechain(log_path, strip=True)
    result = verify(log_path)
    assert not result.ok and result.seq == 1, result
    assert result.problem is not None and "rewritten without the key" in result.problem


def test_stripping_the_later_records_is_caught(log_path: Path) -> None:
    fill(log_path, 4)
    content = log_path.read_bytes().splitlines(keepends=True)
    record = json.loads(content[3])
    del record["mac"], record["key_id"]
    record["hash"] = record_hash(record)
    content[3] = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    log_path.write_bytes(b"".join(content))
    result = verify(log_path)
    assert not result.ok and result.seq == 4
    assert result.problem is not None and "no MAC" in result.problem


def test_an_emptied_log_with_its_head_deleted_is_tampered(log_path: Path) -> None:
    fill(log_path, 3)
    log_path.write_bytes(b"")
    head_path(log_path).unlink()
    result = verify(log_path)
    assert not result.ok and result.status == "tampered"
    code, _, err = verify_cli(log_path)
    assert code == 1 and "TAMPERED" in err and "emptied" in err


def test_a_deleted_head_is_tampered(log_path: Path) -> None:
    fill(log_path, 2)
    head_path(log_path).unlink()
    code, _, err = verify_cli(log_path)
    assert code == 1 and "head file audit.jsonl.head is missing" in err


def test_a_removed_log_is_not_restarted_over_its_head(log_path: Path) -> None:
    fill(log_path, 2)
    log_path.unlink()
    with pytest.raises(AuditError, match="removed"):
        make_log(log_path).append("lock_broken", {})
    assert not log_path.exists()
    assert json.loads(head_path(log_path).read_bytes())["seq"] == 2


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_records_cut_from_the_end_are_not_buried_by_the_next_append(log_path: Path) -> None:
    """The next record's head would vouch for the shortened log: refused."""
    fill(log_path, 5)
    log_path.write_bytes(b"".join(lines_of(log_path)[:2]))
    kept = log_path.read_bytes()
    with pytest.raises(AuditError, match="ends at record 2, but its head says it goes on to 5"):
        make_log(log_path).append("action_intent", {"intent": "break"})
    assert log_path.read_bytes() == kept
    code, _, err = verify_cli(log_path)
    assert code == 1 and "records 3-5 removed from the end" in err


def test_an_emptied_log_is_not_written_again(log_path: Path) -> None:
    fill(log_path, 3)
    log_path.write_bytes(b"")
    with pytest.raises(AuditError, match="ends at record 0, but its head says"):
        make_log(log_path).append("lock_broken", {})
    assert log_path.read_bytes() == b""


@pytest.mark.parametrize("emptied", [True, False])
def test_a_log_whose_head_was_removed_is_not_written_again(log_path: Path, emptied: bool) -> None:
    fill(log_path, 3)
    if emptied:
        log_path.write_bytes(b"")
    kept = log_path.read_bytes()
    head_path(log_path).unlink()
    with pytest.raises(AuditError, match="has no head") as raised:
        make_log(log_path).append("lock_broken", {})
    assert ("it was emptied" in str(raised.value)) is emptied
    assert log_path.read_bytes() == kept and not head_path(log_path).exists()
    code, _, err = verify_cli(log_path)
    assert code == 1 and "TAMPERED" in err


def test_a_damaged_or_forged_head_stops_the_writer(log_path: Path) -> None:
    fill(log_path, 3)
    head_path(log_path).write_bytes(b"{nope")
    with pytest.raises(AuditError, match="damaged head"):
        make_log(log_path).append("lock_broken", {})
    head_path(log_path).write_text(json.dumps({"seq": 1, "hash": "x"}))  # no MAC
    with pytest.raises(AuditError, match="head without a MAC after keyed records"):
        make_log(log_path).append("lock_broken", {})


def test_a_head_a_crash_left_behind_its_record_lets_the_log_go_on(log_path: Path) -> None:
    fill(log_path, 2)
    saved = head_path(log_path).read_bytes()
    make_log(log_path).append("lock_broken", {"reason": "third"})
    head_path(log_path).write_bytes(saved)  # the crash came before the head was written
    assert make_log(log_path).append("lock_broken", {})["seq"] == 4
    assert verify(log_path).ok


def test_an_empty_file_made_beforehand_becomes_the_log(log_path: Path) -> None:
    log_path.parent.mkdir(parents=True)
    log_path.touch(mode=0o600)
    assert make_log(log_path).append("lock_broken", {})["seq"] == 1
    assert verify(log_path).ok


def test_a_log_moved_aside_with_its_head_starts_afresh(log_path: Path) -> None:
    fill(log_path, 3)
    log_path.rename(log_path.with_name("audit.jsonl.1"))
    head_path(log_path).rename(log_path.with_name("audit.jsonl.1.head"))
    code, _, err = verify_cli(log_path)
    assert code == 1 and "keyed from record 1 on: it was removed (or moved aside" in err
    assert make_log(log_path).append("lock_broken", {})["seq"] == 1
    code, out, _ = verify_cli(log_path)
    assert code == 0 and "1 records, chain intact" in out


def test_a_log_removed_with_its_head_is_tampered_not_never_written(log_path: Path) -> None:
    fill(log_path, 3)
    log_path.unlink()
    head_path(log_path).unlink()
    code, _, err = verify_cli(log_path)
    assert code == 1 and "TAMPERED" in err and "nothing has been audited" not in err
    code, _, err = run_cli("audit", "--audit-log", str(log_path))
    assert code == 1 and "TAMPERED" in err


def test_a_log_never_written_is_not_tampered(log_path: Path) -> None:
    fill(log_path.with_name("other.jsonl"), 1)  # the key exists and keys another log
    code, _, err = verify_cli(log_path)
    assert code == 2 and "nothing has been audited there" in err


# ----------------------------------------------------------------------------- odd heads


@pytest.mark.parametrize(
    ("head", "words"),
    [
        (b"{nope", "is damaged: it is not a head lockwatch writes"),
        (b'["a list"]', "is damaged"),
        (b'{"seq": "three", "hash": "x"}', "is damaged"),
        (b'{"seq": -1, "hash": "x"}', "is damaged"),
    ],
)
def test_odd_heads_are_worded_plainly(log_path: Path, head: bytes, words: str) -> None:
    fill(log_path, 3)
    head_path(log_path).write_bytes(head)
    code, _, err = verify_cli(log_path)
    assert code == 1 and words in err, err
    assert "record -1" not in err


def test_a_head_edited_without_the_key(log_path: Path) -> None:
    fill(log_path, 3)
    head = json.loads(head_path(log_path).read_bytes())
    head["seq"] = 2
    head_path(log_path).write_text(json.dumps(head))
    result = verify(log_path)
    assert not result.ok and result.problem is not None
    assert "its MAC does not match" in result.problem


def test_a_head_naming_another_record(log_path: Path) -> None:
    records = fill(log_path, 3)
    log = make_log(log_path)
    key = log.key()
    head = {"seq": 3, "hash": records[0]["hash"], "key_id": key.id}
    head["mac"] = key.mac(
        b"head:" + json.dumps(head, sort_keys=True, separators=(",", ":")).encode()
    )
    head_path(log_path).write_text(json.dumps(head))
    result = verify(log_path)
    assert not result.ok and result.problem is not None
    assert "record 3 is not the record the head names" in result.problem


def test_a_head_from_before_the_last_record_is_only_a_note(log_path: Path) -> None:
    """lockwatch stopped between a record and its head: reported, not an alarm."""
    fill(log_path, 2)
    saved = head_path(log_path).read_bytes()
    make_log(log_path).append("lock_broken", {"reason": "third"})
    head_path(log_path).write_bytes(saved)
    code, out, err = verify_cli(log_path)
    assert code == 0, err
    assert "3 records, chain intact" in out
    assert "the head names record 2, the log goes on to record 3" in out


# ------------------------------------------------------------------------ old unkeyed logs


def legacy(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    prev = GENESIS
    with open(path, "wb") as handle:
        for seq in range(1, count + 1):
            record: dict[str, Any] = {"seq": seq, "event": "lock_broken", "reason": f"r{seq}"}
            record["prev_hash"] = prev
            record["hash"] = prev = record_hash(record)
            handle.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    head_path(path).write_text(json.dumps({"seq": count, "hash": prev}))


def test_an_old_unkeyed_log_still_verifies_and_says_so(log_path: Path) -> None:
    legacy(log_path, 3)
    result = verify(log_path)
    assert result.ok and result.unkeyed == 3 and result.keyed == 0
    code, out, _ = verify_cli(log_path)
    assert code == 0 and "3 records, chain intact; UNKEYED" in out
    code, out, _ = run_cli("audit", "--audit-log", str(log_path))
    assert code == 0 and "r2" in out


def test_an_old_log_goes_on_keyed(log_path: Path) -> None:
    legacy(log_path, 2)
    record = make_log(log_path).append("lock_broken", {"reason": "keyed now"})
    assert record["seq"] == 3 and "mac" in record
    result = verify(log_path)
    assert result.ok and (result.unkeyed, result.keyed) == (2, 1)
    code, out, _ = verify_cli(log_path)
    assert code == 0 and "records 1-2 are UNKEYED" in out and "the 1 after them are keyed" in out


# ------------------------------------------------------------------------------- anchors


def test_each_record_goes_to_the_anchor(log_path: Path) -> None:
    sent: list[str] = []
    records = fill(log_path, 3, anchor=sent.append)
    assert len(sent) == 3
    for line, record in zip(sent, records, strict=True):
        assert f"seq={record['seq']} hash={record['hash']}" in line
        assert line.endswith(f"log={os.path.realpath(log_path)}")
        assert "reason" not in line
    result = verify(log_path, anchors=sent)
    assert result.ok and result.anchored == 3


def test_anchors_catch_a_rewrite_by_someone_with_the_key(tmp_path: Path, log_path: Path) -> None:
    sent: list[str] = []
    fill(log_path, 3, anchor=sent.append)
    anchors = tmp_path / "anchors.txt"
    anchors.write_text("".join(f"Nov 21 host lockwatch-audit[1]: {line}\n" for line in sent))
    log_path.unlink()
    head_path(log_path).unlink()
    rewriter = make_log(log_path)  # the same key, other records: only the anchors can tell
    for n in range(3):
        rewriter.append("lock_broken", {"reason": f"rewritten {n}"})
    assert verify(log_path).ok
    result = verify(log_path, anchors=anchors.read_text().splitlines())
    assert not result.ok and result.seq == 1
    assert result.problem is not None and "anchored in syslog" in result.problem
    code, _, err = verify_cli(log_path, "--anchors", str(anchors))
    assert code == 1 and "anchored in syslog" in err


def test_anchors_catch_records_removed_from_the_end(log_path: Path) -> None:
    sent: list[str] = []
    fill(log_path, 3, anchor=sent.append)
    saved_head = head_path(log_path).read_bytes()
    fill(log_path, 1, anchor=sent.append)
    data = log_path.read_bytes().splitlines(keepends=True)
    log_path.write_bytes(b"".join(data[:3]))
    head_path(log_path).write_bytes(saved_head)  # a saved copy of an older head
    assert verify(log_path).ok  # the head alone cannot tell
    result = verify(log_path, anchors=sent)
    assert not result.ok and result.problem is not None and "record 4" in result.problem


def test_the_syslog_anchor_sends_what_syslog3_would(tmp_path: Path) -> None:
    """A datagram as libc's syslog(3) writes it to /dev/log (here a listening
    socket of the test's own): authpriv.notice, tagged lockwatch-audit[pid]."""
    import socket
    import syslog

    from lockwatch.actions.audit_syslog import SyslogAnchor

    where = str(tmp_path / "log.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(where)
        listener.settimeout(10)
        anchor = SyslogAnchor(path=where)
        assert anchor.check() is None
        anchor("seq=1 hash=sha256:00 event=x log=/l")
        got = listener.recv(4096).decode()
    priority = syslog.LOG_AUTHPRIV | syslog.LOG_NOTICE
    assert got.startswith(f"<{priority}>")
    assert got.endswith(f" lockwatch-audit[{os.getpid()}]: seq=1 hash=sha256:00 event=x log=/l")


def test_a_failing_anchor_never_stops_the_record(log_path: Path) -> None:
    def broken(line: str) -> None:
        raise OSError("no /dev/log")

    record = make_log(log_path, anchor=broken).append("lock_broken", {})
    assert record["seq"] == 1 and verify(log_path).ok
