"""Recordings of the release before a lock carried its source's facts as one value
still replay, and read as the same locks.

`tests/fixtures/recordings/before-facts.jsonl` was written by that release
(commit e653785) from the dashboard's test scenarios (files, PostgreSQL sessions,
kernel locks) plus Redis keys and another host's lock: its locks keep their facts
in the old fields `pg`, `kernel`, `store` and `remote`. Beside it,
`before-facts.records.json` holds what that release's `ls --json` said of each
lock (`lock_record` at the scenarios' instant): this release must say the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from lockwatch.model import codec
from lockwatch.model.changes import ChangeSet
from lockwatch.model.facts import Facts
from lockwatch.model.lock import Lock
from lockwatch.model.report import lock_record
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.policy import NO_POLICY
from lockwatch.sources.postgres.facts import PgLock
from lockwatch.sources.recording import ReplayFeed
from tests.conftest import NOW

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "recordings"


def _change_sets() -> list[ChangeSet]:
    feed = ReplayFeed.open(FIXTURES / "before-facts.jsonl")
    sets = [codec.loads_line(line) for line in feed._lines]
    assert all(isinstance(change, ChangeSet) for change in sets)
    return sets


def test_every_old_lock_reads_with_its_facts_in_the_one_field() -> None:
    sets = _change_sets()
    locks = [entry.lock for change in sets for entry in change.upserts]
    assert len(locks) == 33
    kinds = {type(lock.facts).__name__ for lock in locks if lock.facts is not None}
    # Every family the old Lock had a field for arrives as its source's facts, and
    # a lock file's own fields (its policy, the kernel's word) as the file's facts.
    assert kinds == {"PgLock", "KernelFacts", "StoreLock", "RemoteOrigin", "FileFacts"}
    assert all(isinstance(lock.facts, Facts) for lock in locks)
    by_source = {lock.source: type(lock.facts).__name__ for lock in locks if lock.facts}
    assert by_source["postgres"] == "PgLock" and by_source["kernel"] == "KernelFacts"
    assert by_source["redis"] == "StoreLock"
    # A lock file here reads with the file's facts (another host's, with its origin).
    assert {type(lock.facts).__name__ for lock in locks if lock.source == "file"} == {
        "FileFacts",
        "RemoteOrigin",
    }


def test_old_file_fields_and_idle_limits_read_as_their_sources_facts() -> None:
    locks = [entry.lock for change in _change_sets() for entry in change.upserts]
    files = [lock.facts for lock in locks if isinstance(lock.facts, FileFacts)]
    assert files
    assert any(facts.policy != NO_POLICY for facts in files)
    assert any(facts.evidence is not None for facts in files)
    # PostgreSQL's idle limit was its lock's policy's: its facts' own now.
    limits = {lock.facts.idle_after for lock in locks if isinstance(lock.facts, PgLock)}
    assert limits == {60.0}


# Fields added to the JSON contract since that release (additions only: a field
# that release wrote must still be written the same): PostgreSQL's queue head
# and autovacuum (issue 35); a kernel-locked file's holders and waiters, its
# kernel lock's row being the file's (issue 33); a kernel lock's holder that
# cannot be known (issue 47).
ADDED_SINCE = {
    "postgres": ({"queue_head", "queued_behind"}, {"autovacuum"}),
    "file": ({"holders", "blocking", "holder_uncertain", "taken_by_pid"}, set()),
    "kernel": ({"holder_uncertain", "taken_by_pid"}, set()),
}


def _as_then(record: dict[str, Any]) -> dict[str, Any]:
    """`record` without the fields added since that release."""
    top, holder = ADDED_SINCE.get(record["source"], (set(), set()))
    then = {key: value for key, value in record.items() if key not in top}
    if isinstance(then.get("holder"), dict):
        then["holder"] = {k: v for k, v in then["holder"].items() if k not in holder}
    return then


def test_old_locks_render_the_records_that_release_rendered() -> None:
    expected: list[dict[str, Any]] = orjson.loads(
        (FIXTURES / "before-facts.records.json").read_bytes()
    )
    rendered = [
        orjson.loads(
            orjson.dumps(lock_record(entry.lock, entry.verdict, NOW), option=orjson.OPT_UTC_Z)
        )
        for change in _change_sets()
        for entry in change.upserts
    ]
    assert len(rendered) == len(expected)
    for got, want in zip(rendered, expected, strict=True):
        assert _as_then(got) == want, want["id"]


def test_an_old_field_that_holds_no_facts_is_a_codec_error() -> None:
    old = b'{"~":"Lock","id":"pg:x","source":"postgres","format":"pg_locks","name":"x","path":null'
    assert isinstance(codec.loads_line(old + b"}"), Lock)
    for field in (b"pg", b"kernel", b"store", b"remote"):
        with pytest.raises(codec.CodecError, match="not a lock's facts: Holder"):
            codec.loads_line(old + b',"' + field + b'":{"~":"Holder","pid":1}}')
        with pytest.raises(codec.CodecError):
            codec.loads_line(old + b',"' + field + b'":"a string"}')
    # The new field is checked by its type, as every field is.
    with pytest.raises(codec.CodecError, match="expected a Facts"):
        codec.loads_line(old + b',"facts":{"~":"Holder","pid":1}}')


def test_every_old_file_field_reads_as_the_files_facts() -> None:
    """A lock file's line as that release wrote it, every field it had set: each
    old field of the lock is its file facts' field now."""
    key = {"~": "FileKey", "device": "8:1", "inode": 7}
    why = {"~": "Reason", "code": "unreadable", "message": "cannot read /srv now"}
    old = {
        "~": "Lock",
        "id": "file:/srv/x.lock",
        "source": "file",
        "format": "generic",
        "name": "x",
        "path": "/srv/x.lock",
        "policy": {"~": "StalenessPolicy", "pid_liveness": True, "max_age": 30.0},
        "file_key": key,
        "entry": "dir",
        "evidence": {"~": "KernelEvidence", "waiters": 2, "open_by": [4, 5]},
        "kernel_file": "/srv/state",
        "users": [4],
        "singleton": "loop",
        "unseen": why,
        "unread": why,
        "modified_at": {"~t": "2026-11-21T12:00:00Z"},
    }
    lock = codec.decode(old)
    assert isinstance(lock, Lock) and isinstance(lock.facts, FileFacts)
    facts = lock.facts
    assert facts.policy.pid_liveness and facts.policy.max_age == 30.0
    assert (facts.file_key, facts.entry, facts.kernel_file) == (
        codec.decode(key),
        "dir",
        "/srv/state",
    )
    assert facts.evidence is not None and facts.evidence.open_by == (4, 5)
    assert (facts.users, facts.singleton_name) == ((4,), "loop")
    assert facts.unseen == facts.unread == codec.decode(why)
    assert facts.modified_at is not None and facts.modified_at.year == 2026
