"""The recording codec: every model record survives a round trip, exactly."""

from __future__ import annotations

import gc
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockwatch.model.codec import CodecError, decode, dumps_line, encode, loads_line, register
from lockwatch.model.lock import NO_HOLDER, Holder, Lock, Reason
from lockwatch.model.process import ProcessFacts
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.policy import NO_POLICY, StalenessPolicy
from lockwatch.sources.postgres.facts import AdvisoryKey, PgBackend, PgLock
from tests.facts_of import pg_of

NOW = datetime(2026, 11, 21, 12, 0, 0, 123456, tzinfo=UTC)


# Stand-ins for lockwatch.model.board's Entry and ChangeSet (not imported: the
# codec must serve any registered dataclass the same way).
@dataclass(frozen=True, slots=True)
class FakeEntry:
    lock: Lock
    verdict: Verdict
    facts: ProcessFacts | None


@dataclass(frozen=True, slots=True)
class FakeChangeSet:
    feed: str
    at: datetime
    statuses: tuple[SourceStatus, ...]
    full: bool
    upserts: tuple[FakeEntry, ...]
    removed: tuple[str, ...]
    errors: tuple[ScanError, ...]


@dataclass(frozen=True, slots=True)
class Unregistered:
    x: int


register(FakeEntry, FakeChangeSet, AdvisoryKey, PgBackend, PgLock)


def both_ways(value: Any) -> Any:
    """Through a line of bytes, checking it is one line; and straight back."""
    line = dumps_line(value)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(encode(value)) == value
    return loads_line(line)


def same_lock(a: Lock, b: Lock) -> None:
    assert a == b
    assert a.content == b.content  # content is compare=False on Lock
    assert type(a.content) is type(b.content)


# --- fixtures -------------------------------------------------------------------

POLICY = StalenessPolicy(
    pid_liveness=True,
    max_age=3600.0,
    max_age_inclusive=True,
    foreign_max_age=600.0,
    heartbeat=True,
    heartbeat_late_fraction=0.5,
)


def file_lock(i: int = 1, **changes: Any) -> Lock:
    fields: dict[str, Any] = {
        "id": f"file:/srv/locks/job-{i}.lock",
        "source": "file",
        "format": "gitclaw",
        "name": f"job-{i}",
        "path": f"/srv/locks/job-{i}.lock",
        "holder": Holder(pid=4242, host="tower-01", actor="ci", session="s-1", operation="deploy"),
        "acquired_at": NOW - timedelta(seconds=90, microseconds=7),
        "heartbeat_at": NOW - timedelta(seconds=5),
        "ttl_seconds": 30.0,
        "scope": ("repo/a", "repo/b"),
        "content": {"pid": 4242, "host": "tower-01", "tags": ["a", {"b": None}], "ttl": 30.5},
        "sha256": "ab" * 32,
        "facts": FileFacts(POLICY),
        "defects": (Reason("schema_violation", "pid must be a number"),),
        "notes": (Reason("foreign_host", "written on host tower-01"),),
    }
    fields.update(changes)
    return Lock(**fields)


def backend(pid: int, state: str = "idle in transaction") -> PgBackend:
    return PgBackend(
        pid=pid,
        user="app",
        application="billing",
        client="10.0.0.7",
        state=state,
        query="SELECT pg_advisory_lock(42)",
        backend_type="client backend",
        xact_start=NOW - timedelta(seconds=300),
        query_start=NOW - timedelta(seconds=200),
        state_since=NOW - timedelta(seconds=100),
        wait_event_type="Lock",
        wait_event="advisory",
        prepared_gid=None,
    )


def pg_lock(i: int, session: PgBackend, key: AdvisoryKey | None = None) -> Lock:
    return Lock(
        id=f"pg:main:{i}",
        source="postgres",
        format="pg_locks",
        name=f"advisory {i}",
        path=None,
        holder=Holder(pid=session.pid, actor="app"),
        acquired_at=NOW - timedelta(seconds=100),
        facts=PgLock(
            idle_after=60.0,
            server="postgresql://app@db/main",
            locktype="advisory",
            mode="ExclusiveLock",
            granted=i % 2 == 0,
            database="main",
            backend=session,
            advisory_key=key if key is not None else AdvisoryKey("bigint", key=i),
            wait_start=None if i % 2 == 0 else NOW - timedelta(seconds=3),
            blocked_by=() if i % 2 == 0 else (101, 0),
            blocking=(7, 8),
            blocking_here=(7,),
            blocked_by_prepared=("gid-1",),
        ),
    )


FACTS = ProcessFacts(
    pid=4242, alive=True, started_at=NOW - timedelta(hours=2), cmdline=("python", "-m", "x")
)


def verdict(**changes: Any) -> Verdict:
    fields: dict[str, Any] = {
        "state": State.STALE,
        "reasons": (Reason("too_old", "held for 2h"), Reason("clock_skew", "ahead")),
        "age_seconds": 7200.5,
        "alive": False,
        "process": FACTS,
        "next_change_at": NOW + timedelta(seconds=30),
        "conflicts_with": ("file:/srv/locks/other.lock",),
    }
    fields.update(changes)
    return Verdict(**fields)


# --- round trips ----------------------------------------------------------------


def test_file_lock_with_every_field_set() -> None:
    unseen = Reason("unreadable", "cannot read /srv/locks now (Permission denied)")
    lock = file_lock(facts=FileFacts(POLICY, unseen=unseen, users=(7, 8), singleton_name="s"))
    back = both_ways(lock)
    same_lock(lock, back)
    assert type(back.scope) is tuple and type(back.defects) is tuple
    assert back.acquired_at == lock.acquired_at and back.acquired_at.tzinfo is UTC
    assert back.acquired_at.microsecond == lock.acquired_at.microsecond


def test_minimal_lock() -> None:
    lock = Lock("pg:x", "postgres", "pg_locks", "x", None)
    back = both_ways(lock)
    same_lock(lock, back)
    assert back.holder is NO_HOLDER and back.facts is None
    filed = Lock("file:/x", "file", "generic", "x", None, facts=FileFacts())
    back = both_ways(filed)
    same_lock(filed, back)
    assert isinstance(back.facts, FileFacts) and back.facts.policy is NO_POLICY


@pytest.mark.parametrize(
    "key", [AdvisoryKey("bigint", key=-(2**63)), AdvisoryKey("pair", key1=-1, key2=2**31 - 1)]
)
def test_pg_lock_with_backend_and_advisory_key(key: AdvisoryKey) -> None:
    lock = pg_lock(1, backend(77), key)
    back = both_ways(lock)
    same_lock(lock, back)
    assert isinstance(back.facts, PgLock) and back.facts.advisory_key == key
    assert type(pg_of(back).blocked_by) is tuple


def test_prepared_transaction_backend() -> None:
    session = PgBackend(pid=None, prepared_gid="tx-9", xact_start=NOW)
    assert pg_of(both_ways(pg_lock(2, session))).backend == session


@pytest.mark.parametrize(
    "value",
    [
        verdict(),
        verdict(state=State.ACTIVE, process=None, alive=None, next_change_at=None),
        Verdict(State.WAITING),
        Verdict(State.INVALID, (Reason("unparseable", "not JSON"),), age_seconds=0.0),
    ],
)
def test_verdicts(value: Verdict) -> None:
    back = both_ways(value)
    assert back == value
    assert type(back.state) is State
    assert type(back.reasons) is tuple and type(back.conflicts_with) is tuple


@pytest.mark.parametrize(
    "value",
    [
        SourceStatus("file", "/srv/locks", "watching"),
        SourceStatus(
            "postgres",
            "postgresql://app@db/main",
            "disconnected",
            reason="connection refused",
            updated_at=NOW,
            next_retry_at=NOW + timedelta(seconds=4),
        ),
        ScanError("/srv/locks/secret", "permission denied"),
        ScanError("/srv/locks/x", "too big", code="too_large"),
        FACTS,
        ProcessFacts(pid=1, alive=False),
        Holder(),
        POLICY,
        Reason("a", "b"),
    ],
)
def test_other_records(value: object) -> None:
    assert both_ways(value) == value


def test_change_set_like_records() -> None:
    session = backend(5)
    shared_verdict = verdict(process=None)
    change = FakeChangeSet(
        feed="postgres:main",
        at=NOW,
        statuses=(SourceStatus("postgres", "main", "connected", updated_at=NOW),),
        full=True,
        upserts=(
            FakeEntry(file_lock(1), verdict(), FACTS),
            FakeEntry(file_lock(2, content="12345\n"), verdict(process=FACTS), FACTS),
            FakeEntry(pg_lock(3, session), shared_verdict, None),
            FakeEntry(pg_lock(4, session), shared_verdict, None),
        ),
        removed=("file:/gone", "pg:main:9"),
        errors=(ScanError("/srv/locks/bad", "unreadable"),),
    )
    back = both_ways(change)
    assert back == change
    for mine, theirs in zip(change.upserts, back.upserts, strict=True):
        same_lock(mine.lock, theirs.lock)
    assert type(back.upserts) is tuple and type(back.removed) is tuple
    # Shared objects come back shared.
    assert back.upserts[0].facts is back.upserts[1].facts is back.upserts[1].verdict.process
    assert back.upserts[2].verdict is back.upserts[3].verdict
    assert pg_of(back.upserts[2].lock).backend is pg_of(back.upserts[3].lock).backend


# --- content stays opaque -------------------------------------------------------

CONTENTS = [
    {"~": "Lock", "id": 1},
    {"~": "Nope"},
    {"~r": 0},
    {"~t": "2026-01-01T00:00:00Z"},
    {"~s": [{"~": "Reason"}], "~v": 1},
    {"~m": {"a": 1}, "~x": "\\udcff", "~json": "[]"},
    [1, {"~": "Holder"}, [2, [3]]],
    [],
    {},
    "12345\n",
    "",
    "~",
    None,
    0,
    -(2**63),
    2**64 - 1,
    1.5,
    True,
    {"a": {"b": {"c": [None, False, 0.25, "~t"]}}, "": ""},
]


@pytest.mark.parametrize("content", CONTENTS)
def test_content_round_trips_exactly(content: Any) -> None:
    lock = file_lock(content=content)
    back = both_ways(lock)
    same_lock(lock, back)
    # Byte for byte: lists stay lists, nothing inside was interpreted.
    assert orjson.dumps(back.content) == orjson.dumps(content)


@pytest.mark.parametrize("depth", [100, 260, 1000])
def test_deeply_nested_content(depth: int) -> None:
    content: Any = {"leaf": "~"}
    for level in range(depth - 1):
        content = [content] if level % 2 else {"~": content}
    lock = file_lock(content=content)
    # orjson reads 1024 levels but writes only 254: the line must still be written.
    back = loads_line(dumps_line(FakeEntry(lock, verdict(), None)))
    assert same_json(back.lock.content, content)


def same_json(a: Any, b: Any) -> bool:
    """Deep equality without recursion (== would hit the recursion limit)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if type(x) is dict:
            if list(x) != list(y):
                return False
            stack.extend((x[key], y[key]) for key in x)
        elif type(x) is list:
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif x != y:
            return False
    return True


def test_content_key_escape_form_is_only_for_opaque_fields() -> None:
    line = b'{"~":"Lock","id":"x","source":"file","format":"f","name":"n","path":null,'
    line += b'"content~json":"{\\"~\\":\\"Lock\\"}"}'
    assert loads_line(line).content == {"~": "Lock"}
    with pytest.raises(CodecError, match=r"Lock\.content~json: not JSON"):
        loads_line(line.replace(b'\\"Lock\\"}', b"oops"))


# --- sharing --------------------------------------------------------------------


def test_shared_backend_is_written_once() -> None:
    sessions = [backend(1000 + s) for s in range(60)]
    rows = [pg_lock(i, sessions[i % 60]) for i in range(4800)]
    line = dumps_line(rows)
    assert line.count(b'"~":"PgBackend"') == 60
    back = loads_line(line)
    assert back == tuple(rows)
    assert len({id(pg_of(lock).backend) for lock in back}) == 60
    # Equal but distinct backends are not shared: each is written out in full.
    copies = [pg_lock(i, backend(1000 + i % 60)) for i in range(4800)]
    unshared = dumps_line(copies)
    assert unshared.count(b'"~":"PgBackend"') == 4800
    # The saving is (nearly) every repeated backend record, whole.
    one_backend = len(orjson.dumps(encode(sessions[0])))
    assert len(unshared) - len(line) > 0.95 * (4800 - 60) * one_backend


def test_shared_records_identity_and_table() -> None:
    facts = ProcessFacts(pid=9, alive=True, started_at=NOW)
    v1, v2 = Verdict(State.ACTIVE, process=facts), Verdict(State.STALE, process=facts)
    encoded = encode((v1, v2, facts))
    assert set(encoded) == {"~s", "~v"}
    assert [entry["~"] for entry in encoded["~s"]] == ["ProcessFacts"]
    back = decode(orjson.loads(orjson.dumps(encoded)))
    assert back == (v1, v2, facts)
    assert back[0].process is back[1].process is back[2]


def test_nothing_shared_means_no_table() -> None:
    assert encode(Reason("a", "b")) == {"~": "Reason", "code": "a", "message": "b"}


# --- defaults -------------------------------------------------------------------


def test_defaults_are_left_out_and_restored() -> None:
    assert encode(Holder()) == {"~": "Holder"}
    assert encode(ProcessFacts(pid=3, alive=False)) == {
        "~": "ProcessFacts",
        "pid": 3,
        "alive": False,
    }
    lock = Lock(
        "file:/x", "file", "generic", "x", None, holder=Holder(), facts=FileFacts(StalenessPolicy())
    )
    assert encode(lock) == {
        "~": "Lock",
        "id": "file:/x",
        "source": "file",
        "format": "generic",
        "name": "x",
        "path": None,
        "facts": {"~": "FileFacts"},
    }
    assert decode(encode(lock)) == lock
    # A non-default value equal to the default by == but of another type is kept.
    kept = encode(StalenessPolicy(pid_liveness=0))  # type: ignore[arg-type]
    assert kept == {"~": "StalenessPolicy", "pid_liveness": 0}


def test_unknown_fields_are_ignored() -> None:
    data = encode(Reason("a", "b")) | {"severity": "high", "~future": [1]}
    assert decode(data) == Reason("a", "b")


# --- other values ---------------------------------------------------------------


def test_times_keep_their_offset_or_their_absence() -> None:
    naive = datetime(2026, 1, 2, 3, 4, 5, 6)
    plus2 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    for at in (naive, plus2, NOW, datetime(1, 1, 1, tzinfo=UTC)):
        back = both_ways(SourceStatus("file", "x", "ok", updated_at=at)).updated_at
        assert back == at and back.utcoffset() == at.utcoffset()
    assert encode(NOW) == {"~t": "2026-11-21T12:00:00.123456Z"}


def test_floats_json_cannot_hold() -> None:
    lock = file_lock(ttl_seconds=math.inf)
    assert both_ways(lock).ttl_seconds == math.inf
    back = loads_line(dumps_line(Verdict(State.ACTIVE, age_seconds=math.nan)))
    assert math.isnan(back.age_seconds)
    assert loads_line(dumps_line(-math.inf)) == -math.inf


def test_non_utf8_names_survive() -> None:
    name = "caf\xe9-\udcff\udc80\\x.lock"  # surrogate escapes: a non-UTF-8 file name
    lock = file_lock(
        id=f"file:/srv/{name}",
        name=name,
        path=f"/srv/{name}",
        scope=(name, "plain"),
        notes=(Reason("odd", name),),
        holder=Holder(actor=name),
    )
    back = loads_line(dumps_line(FakeEntry(lock, verdict(), None)))
    same_lock(lock, back.lock)
    assert loads_line(dumps_line(ScanError(name, name))) == ScanError(name, name)


def test_generic_values() -> None:
    """Outside typed fields: maps with `~` keys escaped, registered enums tagged,
    and arrays back as tuples (the model's sequences are tuples)."""
    value = {"~weird": [1, (2, 3)], "plain": {"a": State.ACTIVE}, "at": NOW}
    assert encode(value)["~m"]["plain"] == {"a": {"~e": "State", "v": "active"}}
    back = loads_line(dumps_line(value))
    assert back == {"~weird": (1, (2, 3)), "plain": {"a": State.ACTIVE}, "at": NOW}
    assert type(back["plain"]["a"]) is State
    assert both_ways((Reason("a", "b"), None, "x", 1.5, True)) == (
        Reason("a", "b"),
        None,
        "x",
        1.5,
        True,
    )


# --- errors ---------------------------------------------------------------------


class Color(StrEnum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (Unregistered(1), "Unregistered is not registered"),
        (Color.RED, "enum Color is not registered"),
        ({1: "x"}, "dict keys must be strings"),
        (object(), "cannot encode a object"),
        (file_lock(content={1: "non-string key"}), "cannot be written as JSON"),
        (Holder(pid=2**70), "cannot be written as JSON"),
    ],
)
def test_what_cannot_be_encoded(value: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        dumps_line(value)


LOCK_HEAD = '{"~":"Lock","id":"x","source":"file","format":"f","name":"n","path":null'


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "not JSON"),
        ("{", "not JSON"),
        ('{"~":"Spaceship"}', "unknown record type 'Spaceship'"),
        ('{"~":7}', "type name must be a string"),
        ('{"~":"Reason","code":"a"}', "Reason: Reason lacks its required field 'message'"),
        (LOCK_HEAD + ',"holder":{"~":"Holder","pid":"12"}}', r"Lock\.holder\.pid: expected an int"),
        (LOCK_HEAD + ',"holder":{"~":"Reason","code":"a","message":"b"}}', "expected a Holder"),
        (LOCK_HEAD + ',"holder":[]}', "expected a Holder record, got array"),
        (LOCK_HEAD + ',"scope":"a"}', r"Lock\.scope: expected an array"),
        (LOCK_HEAD + ',"scope":["a",1]}', r"Lock\.scope\[1\]: expected a string"),
        (LOCK_HEAD + ',"acquired_at":"2026-01-01"}', r"Lock\.acquired_at: expected a time"),
        (LOCK_HEAD + ',"acquired_at":{"~t":"yesterday"}}', "'yesterday' is not an RFC 3339"),
        (LOCK_HEAD + ',"ttl_seconds":{"~f":"lots"}}', "expected a number"),
        ('{"~":"Verdict","state":"sleepy"}', r"Verdict\.state: expected a State \('active'"),
        ('{"~":"Verdict","state":"active","alive":1}', "expected true or false"),
        ('{"~":"Verdict","state":"active","process":{"~r":0}}', "reference integer 0 to no"),
        ('{"~s":[{"~":"Verdict","state":"active","process":{"~r":0}}],"~v":{"~r":0}}', "itself"),
        ('{"~s":[{"~":"Spaceship"}],"~v":1}', r"<shared #0>: unknown record type"),
        ('{"~s":{},"~v":1}', "shared-record table must be an array"),
        ('{"~e":"Nope","v":1}', "unknown enum type"),
        ('{"~e":"State","v":"x"}', "expected a State"),
        ('{"~m":[]}', "malformed '~m' map"),
        ('{"a":{"~what":1}}', None),
    ],
)
def test_corrupt_or_foreign_lines(line: str, message: str | None) -> None:
    if message is None:  # an unknown tag in a plain map is just a key
        assert loads_line(line) == {"a": {"~what": 1}}
        return
    with pytest.raises(CodecError, match=message):
        loads_line(line.encode())


def test_errors_point_into_a_change_set() -> None:
    entries = tuple(FakeEntry(file_lock(i), verdict(), None) for i in range(2))
    change = FakeChangeSet("files", NOW, (), False, entries, (), ())
    data = orjson.loads(dumps_line(change))
    assert [entry["~"] for entry in data["~s"]] == ["StalenessPolicy", "ProcessFacts"]
    data["~v"]["upserts"][1]["lock"]["holder"]["pid"] = "x"
    with pytest.raises(CodecError) as caught:
        decode(data)
    assert str(caught.value).startswith("FakeChangeSet.upserts[1].lock.holder.pid: expected")
    assert caught.value.path[0] == "FakeChangeSet"
    assert isinstance(caught.value, ValueError)


def test_collector_state_is_restored() -> None:
    assert gc.isenabled()
    loads_line(dumps_line(file_lock()))
    with pytest.raises(CodecError):
        dumps_line(Unregistered(1))
    with pytest.raises(CodecError):
        loads_line(b"{")
    assert gc.isenabled()
    gc.disable()
    try:
        loads_line(dumps_line(file_lock()))
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- registry -------------------------------------------------------------------


def test_register() -> None:
    register(FakeEntry, FakeChangeSet)  # again: harmless

    @dataclass(frozen=True)
    class Reason:  # another class under a taken name
        code: str

    with pytest.raises(ValueError, match=r"'Reason' is taken by lockwatch\.model\.lock\.Reason"):
        register(Reason)
    with pytest.raises(TypeError, match="neither a dataclass nor an enum"):
        register(int)


def test_class_without_resolvable_annotations_is_read_generically() -> None:
    @dataclass(frozen=True)
    class Local:  # annotations name a local class: get_type_hints cannot resolve them
        items: tuple[Unregistered2, ...]
        when: datetime | None = None

    @dataclass(frozen=True)
    class Unregistered2:
        n: int

    register(Local, Unregistered2)
    value = Local((Unregistered2(1), Unregistered2(2)), when=NOW)
    assert both_ways(value) == value


# --- generated locks ------------------------------------------------------------

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)  # surrogates too
TIMES = st.datetimes(timezones=st.just(UTC))
FLOATS = st.floats(allow_nan=False)  # ±inf included
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | INT64
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_KEYS = st.sampled_from(["~", "~r", "~t", "~s", "~v", "~m", "~x", "a", ""]) | st.text(
    max_size=4
)
CONTENT = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_KEYS, inner, max_size=3),
    max_leaves=12,
)
REASONS = st.lists(st.builds(Reason, ANY_TEXT, ANY_TEXT), max_size=2).map(tuple)
BACKENDS = st.builds(
    PgBackend,
    pid=st.none() | INT64,
    user=st.none() | ANY_TEXT,
    state=st.none() | st.sampled_from(["idle", "active", "idle in transaction"]),
    xact_start=st.none() | TIMES,
    state_since=st.none() | TIMES,
    prepared_gid=st.none() | ANY_TEXT,
)
PG = st.builds(
    PgLock,
    server=ANY_TEXT,
    locktype=st.sampled_from(["advisory", "relation"]),
    mode=ANY_TEXT,
    granted=st.booleans(),
    database=st.none() | ANY_TEXT,
    backend=BACKENDS,
    advisory_key=st.none()
    | st.builds(AdvisoryKey, st.just("bigint"), key=INT64)
    | st.builds(AdvisoryKey, st.just("pair"), key1=INT64, key2=INT64),
    wait_start=st.none() | TIMES,
    blocked_by=st.lists(INT64, max_size=3).map(tuple),
    blocked_by_prepared=st.lists(ANY_TEXT, max_size=2).map(tuple),
)
LOCKS = st.builds(
    Lock,
    id=ANY_TEXT,
    source=st.sampled_from(["file", "postgres", "kernel"]),
    format=ANY_TEXT,
    name=ANY_TEXT,
    path=st.none() | ANY_TEXT,
    holder=st.builds(
        Holder,
        pid=st.none() | INT64,
        host=st.none() | ANY_TEXT,
        actor=st.none() | ANY_TEXT,
        session=st.none() | ANY_TEXT,
        operation=st.none() | ANY_TEXT,
    ),
    acquired_at=st.none() | TIMES,
    heartbeat_at=st.none() | TIMES,
    ttl_seconds=st.none() | FLOATS,
    scope=st.lists(ANY_TEXT, max_size=3).map(tuple),
    content=CONTENT | st.text(),
    sha256=st.none() | st.text("0123456789abcdef", min_size=64, max_size=64),
    defects=REASONS,
    notes=REASONS,
    facts=st.none()
    | PG
    | st.builds(
        FileFacts,
        policy=st.builds(
            StalenessPolicy,
            pid_liveness=st.booleans(),
            max_age=st.none() | FLOATS,
            max_age_inclusive=st.booleans(),
            heartbeat=st.booleans(),
            heartbeat_late_fraction=FLOATS,
        ),
        users=st.none() | st.lists(INT64, max_size=3).map(tuple),
        singleton_name=st.none() | ANY_TEXT,
    ),
).filter(
    # A lock file always has its facts; one without reads back with the default
    # ones (a recording made before the facts kept a file's fields on the lock).
    lambda lock: lock.source != "file" or lock.facts is not None
)
VERDICTS = st.builds(
    Verdict,
    state=st.sampled_from(State),
    reasons=REASONS,
    age_seconds=st.none() | FLOATS,
    alive=st.none() | st.booleans(),
    process=st.none()
    | st.builds(
        ProcessFacts,
        pid=INT64,
        alive=st.booleans(),
        started_at=st.none() | TIMES,
        cmdline=st.lists(ANY_TEXT, max_size=3).map(tuple),
        user=st.none() | ANY_TEXT,
    ),
    next_change_at=st.none() | TIMES,
    conflicts_with=st.lists(ANY_TEXT, max_size=2).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(LOCKS, VERDICTS, st.booleans())
def test_generated_locks_round_trip(lock: Lock, judged: Verdict, share: bool) -> None:
    facts = judged.process
    entries = (FakeEntry(lock, judged, facts),) * (2 if share else 1)
    change = FakeChangeSet("f", NOW, (), share, entries, (lock.id,), ())
    back = loads_line(dumps_line(change))
    assert back == change
    for entry in back.upserts:
        same_lock(lock, entry.lock)
        assert type(entry.verdict.state) is State


# --- corrupt and hostile lines: a CodecError, never another exception --------------


def a_change_line() -> bytes:
    """A line with every kind of record, a shared-record table and opaque content."""
    session = backend(5)
    shared = verdict(process=None)
    change = FakeChangeSet(
        feed="postgres:main",
        at=NOW,
        statuses=(SourceStatus("postgres", "main", "connected", updated_at=NOW),),
        full=True,
        upserts=(
            FakeEntry(file_lock(1, ttl_seconds=math.inf), verdict(), FACTS),
            FakeEntry(pg_lock(3, session), shared, None),
            FakeEntry(pg_lock(4, session), shared, FACTS),
        ),
        removed=("file:/gone",),
        errors=(ScanError("/srv/locks/bad", "unreadable"),),
    )
    return dumps_line(change)


@pytest.mark.parametrize(
    "line",
    [
        "[" * 600 + "]" * 600,
        '{"a":' * 600 + "1" + "}" * 600,
        '[{"~m":{"a":' * 300 + "1" + "}}]" * 300,
        '{"~s":[],"~v":' + "[" * 900 + "]" * 900 + "}",
    ],
    ids=["arrays", "maps", "escaped-maps", "under-a-table"],
)
def test_lines_nested_too_deeply_are_codec_errors(line: str) -> None:
    """orjson reads ~1,000 levels; walking them must not overflow the stack."""
    with pytest.raises(CodecError, match="nested too deeply"):
        loads_line(line.encode())


def test_every_truncation_of_a_line_is_a_codec_error() -> None:
    """A crash mid-write leaves a line cut anywhere."""
    line = a_change_line()
    assert loads_line(line[:-1]) == loads_line(line)  # only the newline gone: still whole
    for cut in range(len(line) - 1):
        with pytest.raises(CodecError, match="not JSON"):
            loads_line(line[:cut])


def json_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in parsed JSON, the root included."""
    paths = [path]
    if type(value) is dict:
        for key, item in value.items():
            paths += json_paths(item, (*path, key))
    elif type(value) is list:
        for index, item in enumerate(value):
            paths += json_paths(item, (*path, index))
    return paths


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if type(value) is dict:
        return {**value, head: replaced(value[head], rest, new)}
    return [replaced(item, rest, new) if i == head else item for i, item in enumerate(value)]


# Each tagged form with a wrong inside, wrong scalars, dangling references.
WRONG_VALUES = [
    [], {}, [[]], "", "x", 0, -1, 2**63, 1.5, True, None,
    {"~": []}, {"~": "Spaceship"}, {"~": "Holder", "pid": []}, {"~r": []}, {"~r": 99},
    {"~r": -1}, {"~t": []}, {"~t": "noon"}, {"~f": []}, {"~f": "lots"}, {"~x": []},
    {"~x": "\\ud800"}, {"~e": []}, {"~e": "State"}, {"~e": "State", "v": []}, {"~m": []},
    {"~m": {"a": []}}, {"~s": [], "~v": 1}, {"content~json": []},
]  # fmt: skip


def test_any_value_of_a_line_swapped_for_a_wrong_one_is_a_codec_error_or_a_value() -> None:
    """Every place of a real line, each wrong value in turn: decoding either makes
    a value or says what is wrong (a TypeError used to escape: `{"~f": []}` in a
    float field, `[]` in a Literal one)."""
    tree = orjson.loads(a_change_line())
    tried = 0
    for path in json_paths(tree):
        for wrong in WRONG_VALUES:
            try:
                decode(replaced(tree, path, wrong))
            except CodecError as err:
                assert str(err)
            tried += 1
    assert tried > 5000  # the line has a few hundred places


TAGS = st.sampled_from(["~", "~r", "~t", "~f", "~x", "~e", "~m", "~s", "~v", "v", "pid", "x"])
HOSTILE = st.recursive(
    JSON_SCALARS | st.sampled_from(["Lock", "Holder", "PgBackend", "State", "nan", "\\ud800"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TAGS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_line_changed_anywhere_decodes_or_is_a_codec_error(data: st.DataObject) -> None:
    """Any value of a real line swapped for hostile JSON (tags in the wrong places,
    dangling references, records of the wrong type, wrong scalars): either it still
    makes a value or decoding says what is wrong; nothing else escapes."""
    tree = orjson.loads(a_change_line())
    paths = json_paths(tree)
    path = data.draw(st.sampled_from(paths), label="path")
    new = data.draw(HOSTILE, label="new")
    try:
        decode(replaced(tree, path, new))
    except CodecError as err:
        assert str(err)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_line_with_bytes_changed_decodes_or_is_a_codec_error(data: st.DataObject) -> None:
    line = bytearray(a_change_line())
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        at = data.draw(st.integers(0, len(line) - 1), label="at")
        line[at : at + 1] = data.draw(st.binary(max_size=3), label="bytes")
    try:
        loads_line(bytes(line))
    except CodecError as err:
        assert str(err)
