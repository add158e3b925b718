"""Locks with no pid, judged by their tools' rules (issue 33, item 3), and files
that are no lock: decoded from bytes and judged at a frozen clock.

The bytes here are what the tools write (checked against the real tools in
tests/formats/test_liblockfile.py, test_vim_swap.py, test_mercurial.py and
test_npm_lockfile.py); vim's block 0 is built field by field after memline.c's
layout (an imitation, said so: the real Vim's is read in test_vim_swap.py).
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_json
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.filelocks import KernelEvidence
from lockwatch.sources.files.decoders import decode_file, mercurial, vim_swap
from lockwatch.sources.files.decoders.base import LockFile
from lockwatch.sources.files.facts import facts_of, refiled
from lockwatch.sources.files.policy import declare
from tests.conftest import LOCAL_HOST, NOW, ago, alive, iso, lock_file

LIVE, DEAD = 100, 4321


def decode(path: str, raw: bytes | str | dict[str, object], age: float = 7.0) -> Lock:
    return decode_file(lock_file(path, raw, mtime=ago(age)))


def judge(lock: Lock) -> Verdict:
    return evaluate(lock, StaticProcesses(alive(LIVE)), FrozenClock(NOW), LOCAL_HOST)


# --- liblockfile and procmail: `0` is no pid ------------------------------------------


@pytest.mark.parametrize(("age", "state"), [(10, State.ACTIVE), (299, State.ACTIVE)])
def test_liblockfile_zero_is_valid_for_five_minutes(age: float, state: State) -> None:
    lock = decode("/var/lock/job.lock", b"0\n", age)
    assert lock.format == "liblockfile"
    verdict = judge(lock)
    assert (verdict.state, verdict.codes) == (state, ("no_pid",))
    assert verdict.next_change_at == ago(age) + timedelta(seconds=300)


@pytest.mark.parametrize("age", [300, 301, 86400])
def test_liblockfile_zero_is_stale_from_five_minutes(age: float) -> None:
    # lockfile_check: valid while now < mtime + 300.
    verdict = judge(decode("/var/lock/job.lock", b"0\n", age))
    assert (verdict.state, verdict.codes) == (State.STALE, ("too_old", "no_pid"))


@pytest.mark.parametrize("age", [5, 3600, 30 * 86400])
def test_procmail_zero_is_held_with_no_bound(age: float) -> None:
    lock = decode("/var/mail/op.lock", b"0", age)
    assert lock.format == "procmail"
    verdict = judge(lock)
    assert (verdict.state, verdict.codes) == (State.ACTIVE, ("no_expiry",))
    assert verdict.next_change_at is None
    assert "-l" in verdict.reasons[0].message


def test_zero_in_a_file_not_named_as_a_lock_is_no_lock_of_theirs() -> None:
    assert decode("/srv/counter", b"0\n").format == "generic"
    assert decode("/srv/counter", b"0").format == "generic"


# --- an empty file: a sentinel or an existence lock -------------------------------------


def _with(lock: Lock, evidence: KernelEvidence) -> Lock:
    return refiled(lock, {"evidence": evidence}, acquired_at=None)


def test_an_empty_file_nobody_holds_or_has_open_is_unknown_never_free() -> None:
    # npm's lockfile: created O_EXCL and closed at once, held while it exists.
    lock = decode("/srv/app/app.lock", b"")
    verdict = judge(_with(lock, KernelEvidence()))
    assert verdict.state is State.UNKNOWN
    assert verdict.codes == ("existence_unknown",)
    assert "npm" in verdict.reasons[0].message


def test_an_empty_file_the_kernel_was_seen_holding_is_free_once_released() -> None:
    lock = decode("/srv/app/app.lock", b"")
    verdict = judge(_with(lock, KernelEvidence(was_held=True)))
    assert (verdict.state, verdict.codes) == (State.FREE, ("not_held",))


def test_the_unknown_reason_names_the_files_age_from_its_mtime() -> None:
    # The kernel's word drops a sentinel's mtime from its age (with_evidence); the
    # existence reading's age is still the file's, named in words.
    decoded = decode("/srv/app/app.lock", b"", age=192)
    lock = refiled(decoded, {"modified_at": ago(192)}, acquired_at=None)
    verdict = judge(refiled(lock, {"evidence": KernelEvidence()}))
    assert verdict.codes == ("existence_unknown",)
    assert verdict.age_seconds is None
    assert "an empty file, last modified 3m12s ago" in verdict.reasons[0].message


@pytest.mark.parametrize(
    ("protocol", "evidence", "state", "codes"),
    [
        ("kernel", KernelEvidence(), State.FREE, ("declared_kernel_sentinel",)),
        ("kernel", None, State.UNKNOWN, ("no_kernel_evidence",)),
        ("existence", KernelEvidence(), State.ACTIVE, ("declared_existence", "no_pid")),
        ("existence", None, State.ACTIVE, ("declared_existence", "no_pid")),
    ],
)
def test_a_declared_protocol_settles_an_empty_file(
    protocol: str, evidence: KernelEvidence | None, state: State, codes: tuple[str, ...]
) -> None:
    lock = decode("/srv/app/app.lock", b"")
    lock = refiled(lock, {"policy": declare(facts_of(lock).policy, protocol), "evidence": evidence})
    assert (judge(lock).state, judge(lock).codes) == (state, codes)


@pytest.mark.parametrize(
    ("protocol", "pid", "state", "codes"),
    [
        (None, LIVE, State.ACTIVE, ("live_pid_no_kernel_lock",)),
        (None, DEAD, State.STALE, ("holder_dead",)),
        ("kernel", LIVE, State.FREE, ("declared_kernel_sentinel",)),
        ("kernel", DEAD, State.FREE, ("declared_kernel_sentinel",)),
        ("existence", LIVE, State.ACTIVE, ("declared_existence",)),
        ("existence", DEAD, State.STALE, ("holder_dead", "declared_existence")),
    ],
)
def test_a_bare_pid_no_kernel_lock_is_on_is_never_a_bare_active(
    protocol: str | None, pid: int, state: State, codes: tuple[str, ...]
) -> None:
    lock = decode("/srv/app/job.lock", f"{pid}\n")
    if protocol is not None:
        lock = refiled(lock, {"policy": declare(facts_of(lock).policy, protocol)})
    verdict = judge(refiled(lock, {"evidence": KernelEvidence()}))
    assert (verdict.state, verdict.codes) == (state, codes)


def test_a_declaration_leaves_a_formats_own_rules_alone() -> None:
    lock = decode("/srv/app/job.lock", {"pid": LIVE})  # a JSON record, not a bare pid
    assert declare(facts_of(lock).policy, "kernel") is facts_of(lock).policy


# --- a record's own expiry --------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["expires_at", "expiresAt", "expires", "expiry", "deadline", "valid_until"]
)
def test_a_record_past_its_own_expiry_is_expired_whatever_its_pid(key: str) -> None:
    lock = decode("/srv/x.lock", {"pid": LIVE, key: iso(ago(3 * 3600))})
    verdict = judge(lock)
    assert verdict.state is State.STALE
    assert verdict.codes == ("expired",)
    assert lock_json(lock, verdict)["expires_at"] == iso(ago(3 * 3600))


def test_an_expiry_as_epoch_seconds_counts_and_a_future_one_is_a_deadline() -> None:
    past = decode("/srv/x.lock", {"pid": LIVE, "expires": ago(60).timestamp()})
    assert judge(past).codes == ("expired",)
    future = decode("/srv/x.lock", {"pid": LIVE, "deadline": iso(NOW + timedelta(hours=1))})
    verdict = judge(future)
    assert verdict.state is State.ACTIVE
    assert verdict.next_change_at == NOW + timedelta(hours=1)


@pytest.mark.parametrize("key", ["ttl", "ttl_seconds", "ttlSeconds"])
def test_a_ttl_counts_from_the_recorded_start(key: str) -> None:
    lock = decode("/srv/x.lock", {"pid": LIVE, "acquired_at": iso(ago(120)), key: 60})
    assert lock.expires_at == ago(60)
    assert judge(lock).codes == ("expired",)
    fresh = decode("/srv/x.lock", {"pid": LIVE, "acquired_at": iso(ago(30)), key: 60})
    assert judge(fresh).state is State.ACTIVE


def test_a_ttl_counts_from_the_last_heartbeat_when_there_is_one() -> None:
    doc = {"pid": LIVE, "acquired_at": iso(ago(600)), "heartbeat_at": iso(ago(10)), "ttl": 60}
    assert decode("/srv/x.lock", doc).expires_at == ago(10) + timedelta(seconds=60)


def test_a_ttl_with_no_recorded_start_is_shown_not_judged() -> None:
    lock = decode("/srv/x.lock", {"pid": LIVE, "ttl": 60}, age=3600)
    assert (lock.ttl_seconds, lock.expires_at) == (60, None)
    assert judge(lock).state is State.ACTIVE


def test_an_expiry_that_is_no_time_is_a_schema_violation() -> None:
    verdict = judge(decode("/srv/x.lock", {"pid": LIVE, "expires_at": "soon"}))
    assert (verdict.state, verdict.codes) == (State.INVALID, ("schema_violation",))


# --- notes and files that are no lock ---------------------------------------------------


def test_a_plain_text_note_is_a_lock_with_no_pid_and_its_words() -> None:
    lock = decode("/srv/deploy.lock", "locked by bob, do not touch\n")
    verdict = judge(lock)
    assert (verdict.state, verdict.codes) == (State.ACTIVE, ("no_pid",))
    assert lock.holder.operation == "locked by bob, do not touch"
    assert "locked by bob" in verdict.reasons[0].message


SHADOW = "".join(f"user{i}:*:19000:0:99999:7:::\n" for i in range(30))


@pytest.mark.parametrize(
    ("path", "raw", "why"),
    [
        ("/etc/shadow", SHADOW, "30 lines of text"),
        ("/usr/bin/tool", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 56, "binary"),
        ("/srv/blob", b"\xff\xfe\xfd", "not text"),
        ("/srv/package.json", {"name": "app", "version": "1.0.0"}, "none of a lock's keys"),
        ("/srv/list.json", "[1, 2, 3]", "JSON list"),
    ],
)
def test_a_named_file_that_is_no_lock_says_so_and_is_never_invalid(
    path: str, raw: bytes | str | dict[str, object], why: str
) -> None:
    lock = decode(path, raw)
    verdict = judge(lock)
    assert verdict.state is State.UNKNOWN
    assert verdict.codes == ("not_a_lock",)
    assert why in verdict.reasons[0].message
    json.dumps(lock_json(lock, verdict))


def test_a_lock_named_file_with_garbage_stays_invalid() -> None:
    # Its name says it is a lock: broken content is a broken lock, not "no lock".
    verdict = judge(decode("/srv/x.lock", b"\x00\x01"))
    assert (verdict.state, verdict.codes) == (State.INVALID, ("unparseable",))


# --- vim swap files ---------------------------------------------------------------------


def block0(pid: int, host: str, user: str = "op", name: str = "/srv/notes.txt") -> bytes:
    """Block 0 as memline.c lays it out (an imitation: the real one is in test_vim_swap.py)."""
    fname = name.encode().ljust(900, b"\0")
    fname = fname[:-1] + b"\x55"  # unsaved changes
    return (
        b"b0"
        + b"VIM 9.0".ljust(10, b"\0")
        + (4096).to_bytes(4, "little")
        + bytes(8)
        + pid.to_bytes(4, "little")
        + user.encode().ljust(40, b"\0")
        + host.encode().ljust(40, b"\0")
        + fname
    ).ljust(4096, b"\0")


@pytest.mark.parametrize(
    ("pid", "host", "state", "first"),
    [
        (LIVE, LOCAL_HOST, State.ACTIVE, "unsaved_changes"),
        (DEAD, LOCAL_HOST, State.STALE, "holder_dead"),
        (LIVE, "elsewhere", State.UNKNOWN, "foreign_host"),
        (DEAD, "elsewhere", State.UNKNOWN, "foreign_host"),
    ],
)
def test_vim_swap_is_judged_as_vim_r_does(pid: int, host: str, state: State, first: str) -> None:
    lock = decode("/srv/.notes.txt.swp", block0(pid, host))
    assert lock.format == "vim-swap"
    assert (lock.holder.pid, lock.holder.host, lock.holder.actor) == (pid, host, "op")
    assert lock.name == "notes.txt"
    verdict = judge(lock)
    assert verdict.state is state
    assert verdict.codes[0] == first
    assert "unsaved_changes" in verdict.codes


@pytest.mark.parametrize(
    ("name", "wanted"),
    [
        (".notes.txt.swp", True),
        (".notes.txt.swo", True),
        (".notes.txt.sva", True),
        ("%srv%notes.txt.swp", True),
        ("notes.swp", False),
        ("game.sav", False),
        (".x.swq", False),
    ],
)
def test_vim_swap_names(name: str, wanted: bool) -> None:
    assert vim_swap.wants(f"/srv/{name}", "file") is wanted


def test_a_swap_named_file_that_is_no_swap_file_is_not_vims() -> None:
    assert vim_swap.read(LockFile("/srv/.x.swp", b"hello" * 300, 0.0, None)) is None


# --- Mercurial --------------------------------------------------------------------------


def hg(path: str, target: str) -> Lock:
    file = LockFile(path, b"", ago(5).timestamp(), None, kind="symlink", target=target)
    return decode_file(file)


NS = mercurial.local_namespace()
HERE = f"{LOCAL_HOST}/{NS}" if NS else LOCAL_HOST


@pytest.mark.parametrize(
    ("target", "state", "codes"),
    [
        (f"{HERE}:{LIVE}", State.ACTIVE, ()),
        (f"{HERE}:{DEAD}", State.STALE, ("holder_dead",)),
        (f"{LOCAL_HOST}:{DEAD}", State.STALE, ("holder_dead",)),
        (f"elsewhere/{NS}:{DEAD}", State.UNKNOWN, ("foreign_host",)),
        (f"{LOCAL_HOST}/1234abcd:{DEAD}", State.UNKNOWN, ("other_pid_namespace",)),
        (f"{DEAD}", State.UNKNOWN, ("no_pid",)),
        ("garbage", State.UNKNOWN, ("no_pid",)),
    ],
)
def test_mercurial_locks_are_judged_as_hg_does(
    target: str, state: State, codes: tuple[str, ...]
) -> None:
    for path in ("/repo/.hg/wlock", "/repo/.hg/store/lock"):
        lock = hg(path, target)
        assert lock.format == "mercurial"
        assert lock.name in ("repo wlock", "repo store lock")
        verdict = judge(lock)
        assert (verdict.state, verdict.codes) == (state, codes), target
        assert verdict.state is not State.INVALID


def test_mercurial_lock_places() -> None:
    assert mercurial.wants("/r/.hg/wlock", "symlink")
    assert mercurial.wants("/r/.hg/store/lock", "symlink")
    assert mercurial.wants("/r/.hg/wlock", "file")  # where symlinks cannot be made
    assert not mercurial.wants("/r/wlock", "symlink")
    assert not mercurial.wants("/r/store/lock", "symlink")
