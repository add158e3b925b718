"""Other hosts' locks: their documents read record by record (bad input left out,
never guessed at), remotes named and given tokens, polled with backoff while
away (last data kept), and read-only here."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from lockwatch.actions.plan import Kind
from lockwatch.actions.targets import prepare
from lockwatch.clock import FrozenClock
from lockwatch.config import Config, ConfigError
from lockwatch.model import codec
from lockwatch.model.changes import ChangeSet
from lockwatch.model.kinds import kinds
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, evaluate
from lockwatch.sources.contract import SourceError, Wanted
from lockwatch.sources.polled import PolledFeed
from lockwatch.sources.recording import Recorder  # noqa: F401 - registers the codec's types
from lockwatch.sources.remote import ids
from lockwatch.sources.remote.client import RemoteProblem
from lockwatch.sources.remote.document import DocumentError, read_document
from lockwatch.sources.remote.endpoints import (
    EndpointError,
    Remote,
    normalise,
    read_settings,
)
from lockwatch.sources.remote.plugin import SOURCE, SelectedRemotes, find_remote
from lockwatch.sources.remote.poller import RemotePoller
from lockwatch.ui.cells import fit
from tests.conftest import LOCAL_HOST, NOW
from tests.facts_of import RemoteOrigin, remote_of

URL = "http://db7:9464"


def record(lock_id: str = "file:/srv/locks/deploy.pid", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": lock_id,
        "source": "file",
        "format": "generic",
        "name": lock_id.rsplit("/", 1)[-1].split(".")[0],
        "path": lock_id.removeprefix("file:"),
        "state": "stale",
        "reasons": [{"code": "holder_dead", "message": "holder pid 4242 is not running"}],
        "holder": {"pid": 4242, "host": None, "alive": False},
        "acquired_at": "2026-11-21T11:50:00Z",
        "age_seconds": 600.0,
        "scope": [],
        "blocking": [],
        "sha256": "ab" * 32,
    }
    base.update(fields)
    return base


def document(*records: Any, host: str = "db7", **extra: Any) -> bytes:
    doc = {
        "schema": "lockwatch.ls/1",
        "generated_at": "2026-11-21T12:00:00Z",
        "host": host,
        "sources": [{"kind": "file", "name": "/srv/locks", "status": "ok"}],
        "locks": list(records),
        "errors": [],
        "blocking": [],
        **extra,
    }
    return orjson.dumps(doc)


def test_a_document_becomes_locks_judged_there() -> None:
    listing = read_document(
        document(record(), record("file:/srv/locks/live.pid", state="active", reasons=[])),
        URL,
        local_host=LOCAL_HOST,
    )
    assert listing.host == "db7" and listing.stale == 1 and listing.ignored == 0
    stale, live = listing.locks
    assert stale.id == ids.remote_id(URL, "file:/srv/locks/deploy.pid")
    assert ids.parse_remote(stale.id) == (URL, "file:/srv/locks/deploy.pid")
    assert isinstance(stale.facts, RemoteOrigin) and stale.facts.host == "db7"
    assert stale.scope == ()  # another host's paths never overlap ours
    # Judged there: this host's process table and clock say nothing about it...
    verdict = evaluate(stale, StaticProcesses(), FrozenClock(NOW), LOCAL_HOST)
    assert verdict.state is State.STALE
    assert verdict.codes == ("holder_dead",)
    # ...but its age moves on.
    later = evaluate(stale, StaticProcesses(), FrozenClock(NOW + timedelta(seconds=60)), LOCAL_HOST)
    assert later.age_seconds == pytest.approx(verdict.age_seconds + 60)  # type: ignore[operator]
    assert evaluate(live, StaticProcesses(), FrozenClock(NOW), LOCAL_HOST).state is State.ACTIVE
    # The records go out as the host wrote them, with whose they are.
    out = listing.records[0]
    assert out["id"] == "file:/srv/locks/deploy.pid"
    assert (out["host"], out["remote"]) == ("db7", URL)


def test_a_lock_passed_on_keeps_its_own_host() -> None:
    listing = read_document(document(record(host="db9")), URL, local_host=LOCAL_HOST)
    assert (
        isinstance(listing.locks[0].facts, RemoteOrigin)
        and remote_of(listing.locks[0]).host == "db9"
    )
    assert listing.records[0]["host"] == "db9"


@pytest.mark.parametrize(
    "data",
    [
        b"<html>login</html>",
        b"[]",
        b'{"schema": "lockwatch.ls/2", "host": "x", "generated_at": "2026-01-01T00:00:00Z",'
        b' "locks": []}',
        b'{"schema": "lockwatch.ls/1", "generated_at": "2026-01-01T00:00:00Z", "locks": []}',
        b'{"schema": "lockwatch.ls/1", "host": "x", "generated_at": "soon", "locks": []}',
        b'{"schema": "lockwatch.ls/1", "host": "x", "generated_at": "2026-01-01T00:00:00Z",'
        b' "locks": {}}',
    ],
)
def test_what_is_not_the_contract_is_refused_whole(data: bytes) -> None:
    with pytest.raises(DocumentError):
        read_document(data, URL, local_host=LOCAL_HOST)


@pytest.mark.parametrize(
    "bad",
    [
        "not a record",
        record(id=""),
        record(id=None),
        record(source=7),
        record(state="exploded"),
        record(name=None),
        record(reasons="holder_dead"),
        record(reasons=[{"code": "holder_dead"}]),
        record(reasons=[["holder_dead", "gone"]]),
    ],
)
def test_a_record_that_breaks_the_contract_is_left_out_and_counted(bad: Any) -> None:
    listing = read_document(document(bad, record("file:/srv/ok.pid")), URL, local_host=LOCAL_HOST)
    assert [lock.name for lock in listing.locks] == ["ok"]
    assert listing.ignored == 1
    assert "1 records not understood, left out" in listing.summary()


def test_odd_values_drop_the_record_not_trusted_nor_guessed() -> None:
    # Each of these once came through with the odd field blanked: a record with
    # a field outside the contract is not that record, and is left out whole.
    for odd in (
        record(holder={"pid": True, "host": 5, "alive": "yes"}),
        record(acquired_at="yesterday"),
        record(ttl_seconds=-3),
        record(age_seconds="old"),
    ):
        listing = read_document(document(odd), URL, local_host=LOCAL_HOST)
        assert listing.locks == [] and listing.records == [] and listing.ignored == 1
    # null is what the contract says for "not known": kept.
    (lock,) = read_document(
        document(record(holder={"pid": None, "alive": None}, age_seconds=None, acquired_at=None)),
        URL,
        local_host=LOCAL_HOST,
    ).locks
    assert lock.holder.pid is None and lock.acquired_at is None
    assert remote_of(lock).alive is None and remote_of(lock).age_seconds is None


def test_hostile_text_reaches_the_screen_escaped() -> None:
    (lock,) = read_document(
        document(record(name="x\x1b]0;pwned\x07\u202e")), URL, local_host=LOCAL_HOST
    ).locks
    cell = fit(lock.name, 40)
    assert "\x1b" not in cell and "\u202e" not in cell and "\\x1b" in cell


def test_unwell_sources_there_are_told() -> None:
    sources = [
        {"kind": "postgres", "name": "monitor@db7:5432/app", "status": "disconnected"},
        {"kind": "file", "name": "/srv", "status": "ok"},
    ]
    listing = read_document(document(sources=sources, errors=[{}, {}]), URL, local_host=LOCAL_HOST)
    assert listing.summary() == (
        "host db7; postgres monitor@db7:5432/app disconnected; 2 unreadable there"
    )


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("db1:9464", "http://db1:9464"),
        ("HTTPS://DB1.example:9464/", "https://db1.example:9464"),
        ("http://db1:9464/v1/locks", "http://db1:9464"),
        ("http://proxy/lockwatch/db1/", "http://proxy/lockwatch/db1"),
        ("http://[::1]:9464", "http://[::1]:9464"),
    ],
)
def test_remote_urls_are_named_one_way(given: str, named: str) -> None:
    assert normalise(given) == named


@pytest.mark.parametrize(
    "given",
    [
        "http://ops:hunter2@db1:9464",
        "ftp://db1",
        "http://db1:9464/?x=1",
        "http://db1:9464#frag",
        "http://",
        "http://db1:99999",
        "db 1:9464",
        "",
    ],
)
def test_bad_remote_urls(given: str) -> None:
    with pytest.raises(EndpointError) as caught:
        normalise(given)
    assert "hunter2" not in str(caught.value)


def test_remote_table() -> None:
    settings = read_settings(
        {
            "remote": {
                "urls": ["db1:9464", "http://db1:9464/", "https://db2:9464"],
                "token_file": "/etc/lockwatch/fleet.token",
                "token_files": {"https://db2:9464/": "/etc/lockwatch/db2.token"},
                "timeout": 1.5,
            }
        },
        "lockwatch.toml",
    )
    assert settings.urls == ("http://db1:9464", "https://db2:9464")
    assert settings.token_files == {"https://db2:9464": "/etc/lockwatch/db2.token"}
    assert settings.timeout == 1.5


@pytest.mark.parametrize(
    "table",
    [
        {"urls": 7},
        {"urls": ["ftp://x"]},
        {"token_file": ""},
        {"token_files": {"http://a:1": 3}},
        {"timeout": 0},
        {"timeout": True},
    ],
)
def test_bad_remote_tables(table: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        read_settings({"remote": table}, "lockwatch.toml")


def wanted(values: dict[str, Any], tables: dict[str, Any] | None = None) -> Wanted:
    config = Config(sources={"remote": read_settings(tables or {}, "x")})
    return Wanted((), values, config, {})


def test_flags_win_and_each_remote_gets_its_token(tmp_path: Path) -> None:
    fleet, own, flag = (tmp_path / name for name in ("fleet", "own", "flag"))
    fleet.write_text("fleet-token\n")
    own.write_text("own-token")
    flag.write_text("flag-token")
    tables = {
        "remote": {
            "urls": ["http://a:1", "http://b:1"],
            "token_file": str(fleet),
            "token_files": {"http://b:1": str(own)},
        }
    }
    selected = SOURCE.select(wanted({}, tables))
    assert isinstance(selected, SelectedRemotes)
    assert [(r.url, r.token) for r in selected.remotes] == [
        ("http://a:1", "fleet-token"),
        ("http://b:1", "own-token"),
    ]
    assert "fleet-token" not in repr(selected)
    chosen = SOURCE.select(wanted({"remotes": ("c:2",), "remote_token_file": str(flag)}, tables))
    assert isinstance(chosen, SelectedRemotes)
    assert [(r.url, r.token) for r in chosen.remotes] == [("http://c:2", "flag-token")]
    assert SOURCE.select(wanted({})) is None
    with pytest.raises(SourceError, match="token file"):
        SOURCE.select(wanted({"remotes": ("c:2",), "remote_token_file": str(tmp_path / "no")}))
    with pytest.raises(SourceError, match="--remote"):
        SOURCE.select(wanted({"remotes": ("http://u:p@c:2",)}))


class Answers:
    """A remote that answers what it is told, in order (bytes, or a problem)."""

    def __init__(self, *answers: bytes | RemoteProblem) -> None:
        self.answers = list(answers)
        self.closed = False

    def fetch(self) -> bytes:
        answer = self.answers.pop(0)
        if isinstance(answer, RemoteProblem):
            raise answer
        return answer

    def close(self) -> None:
        self.closed = True


def test_an_unreachable_remote_backs_off_and_keeps_its_last_locks() -> None:
    clock = FrozenClock(NOW)
    refused = RemoteProblem("disconnected", "unreachable: Connection refused")
    first = document(record("file:/srv/a.pid"), record("file:/srv/b.pid"))
    answers = Answers(first, refused, refused, refused, document(record("file:/srv/a.pid")))
    poller = RemotePoller(
        Remote(URL), host=LOCAL_HOST, clock=clock, fetcher=answers, jitter=lambda: 0.0
    )
    feed = PolledFeed(poller, host=LOCAL_HOST, interval=2.0)

    change, wait = feed.poll()
    assert wait == 2.0 and len(change.upserts) == 2
    (status,) = change.statuses
    assert (status.kind, status.name, status.state) == ("remote", URL, "connected")
    assert status.updated_at == NOW and status.reason == "host db7"

    waits = []
    for _ in range(3):
        clock.advance(5)
        change, wait = feed.poll()
        waits.append(wait)
        (status,) = change.statuses
        # Nothing removed: the last locks stay, as old as updated_at says.
        assert change.upserts == () and change.removed == ()
        assert status.state == "disconnected" and "unreachable" in (status.reason or "")
        assert status.updated_at == NOW
        assert status.next_retry_at == clock.now() + timedelta(seconds=wait)
    assert waits == [1.0, 2.0, 4.0]

    clock.advance(5)
    change, wait = feed.poll()
    assert change.statuses[0].state == "connected" and wait == 2.0
    assert change.removed == (ids.remote_id(URL, "file:/srv/b.pid"),)
    assert poller.failures == 0


def test_an_answer_that_is_not_a_serve_is_an_error() -> None:
    poller = RemotePoller(
        Remote(URL),
        host=LOCAL_HOST,
        clock=FrozenClock(NOW),
        fetcher=Answers(b"<html>"),
        jitter=lambda: 0.0,
    )
    polled = poller.poll()
    assert polled.locks is None
    assert polled.statuses[0].state == "error"
    assert "not a lockwatch serve" in (polled.statuses[0].reason or "")


def test_an_action_on_another_hosts_lock_names_the_command_there() -> None:
    (lock,) = read_document(document(record()), URL, local_host=LOCAL_HOST).locks
    verdict = evaluate(lock, StaticProcesses(), FrozenClock(NOW), LOCAL_HOST)
    for kind in kinds():
        plan = prepare(kind, lock, verdict, roots=("/srv",))
        assert plan.refusal is not None
        code, message = plan.refusal
        assert code == "remote"
        assert f"On db7 run: lockwatch {kind.value} file:/srv/locks/deploy.pid --reason" in message


def test_a_remote_id_as_a_target_is_refused_the_same_way() -> None:
    target = ids.remote_id(URL, "pg:monitor@db7:5432/app:4242:advisory:1:ExclusiveLock:held")
    lock, verdict, _ = find_remote(target)
    plan = prepare(Kind.BREAK, lock, verdict)
    assert plan.refusal is not None and plan.refusal[0] == "remote"
    assert (
        "lockwatch break pg:monitor@db7:5432/app:4242:advisory:1:ExclusiveLock:held --"
        in (plan.refusal[1])
    )
    with pytest.raises(SourceError):
        find_remote("remote:http://db7:9464")


def test_remote_locks_record_and_replay() -> None:
    (lock,) = read_document(document(record()), URL, local_host=LOCAL_HOST).locks
    verdict = evaluate(lock, StaticProcesses(), FrozenClock(NOW), LOCAL_HOST)
    from lockwatch.model.changes import Entry

    change = ChangeSet("remote:" + URL, NOW, upserts=(Entry(lock, verdict),))
    again = codec.loads_line(codec.dumps_line(change))
    assert again == change
    assert remote_of(again.upserts[0].lock) == remote_of(lock)
