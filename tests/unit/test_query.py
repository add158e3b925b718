"""The filter language: every field, negation, AND, quoting, and every error it reports.

Five locks, one per kind the dashboard shows, each with a fixed verdict:
`deploy` (a file lock, active), `agent` (a pg advisory lock, stale), `orders` (a pg
lock whose holder is known only from its backend, waiting), `cron` (a kernel lock,
active, a colon in its name) and `broken` (an unreadable file lock, invalid).
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockwatch.model import query
from lockwatch.model.lock import NO_HOLDER, Holder, Lock, Reason
from lockwatch.model.query import EVERYTHING, FIELDS, Query, QueryError, Term
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.postgres.facts import PgBackend, PgLock
from lockwatch.sources.registry import source_names

SOURCES = source_names()


def parse(text: str) -> Query:
    """The filter as the dashboard parses it: `source:` takes the registry's names."""
    return query.parse(text, SOURCES)


def reasons(*codes: str) -> tuple[Reason, ...]:
    return tuple(Reason(code, f"because {code}") for code in codes)


def pg_lock(backend: PgBackend) -> PgLock:
    return PgLock(
        server="postgresql://db.example/app",
        locktype="advisory",
        mode="ExclusiveLock",
        granted=True,
        database="app",
        backend=backend,
    )


DEPLOY = Lock(
    id="file:/var/locks/Deploy-Main.lock",
    source="file",
    format="tower-fleet",
    name="Deploy-Main",
    path="/var/locks/Deploy-Main.lock",
    holder=Holder(
        pid=4242, host="Tower-01.lan", actor="Alice", session="req-77", operation="Rolling Deploy"
    ),
)
AGENT = Lock(
    id="pg:db:9001:advisory:1:42:ExclusiveLock:granted",
    source="postgres",
    format="pg-advisory",
    name="agent:42",
    path=None,
    holder=Holder(
        pid=9001,
        host="10.0.0.5",
        actor="app_user",
        session="billing-worker",
        operation="select pg_advisory_lock(1, 42)",
    ),
    facts=pg_lock(PgBackend(pid=9001, user="app_user", application="billing-worker")),
)
# No Holder at all: `holder:` and `pid:` must find it through its backend.
ORDERS = Lock(
    id="pg:db:777:relation:orders:RowExclusiveLock:waiting",
    source="postgres",
    format="pg-relation",
    name="orders",
    path=None,
    facts=pg_lock(PgBackend(pid=777, user="Reporter", application="Nightly-Export")),
)
CRON = Lock(
    id="kernel:/run/lock/cron.lck",
    source="kernel",
    format="flock",
    name="cron 12:30",
    path="/run/lock/cron.lck",
    holder=Holder(pid=123),
)
BROKEN = Lock(
    id="file:/var/locks/broken.lock",
    source="file",
    format="generic",
    name="broken",
    path="/var/locks/broken.lock",
    holder=NO_HOLDER,
)

ROWS: tuple[tuple[Lock, Verdict], ...] = (
    (DEPLOY, Verdict(State.ACTIVE, reasons("heartbeat_late", "scope_conflict"))),
    (AGENT, Verdict(State.STALE, reasons("idle_holder", "blocking"))),
    (ORDERS, Verdict(State.WAITING, reasons("waiting"))),
    (CRON, Verdict(State.ACTIVE)),
    (BROKEN, Verdict(State.INVALID, reasons("schema_violation"))),
)
ALL = {"Deploy-Main", "agent:42", "orders", "cron 12:30", "broken"}


def hits(text: str) -> set[str]:
    query = parse(text)
    return {lock.name for lock, verdict in ROWS if query.matches(lock, verdict)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # state: exact, or an unambiguous prefix
        ("state:active", {"Deploy-Main", "cron 12:30"}),
        ("state:stale", {"agent:42"}),
        ("state:invalid", {"broken"}),
        ("state:waiting", {"orders"}),
        ("state:st", {"agent:42"}),
        ("state:w", {"orders"}),
        ("STATE:Stale", {"agent:42"}),
        # source: pg is postgres; prefixes work
        ("source:file", {"Deploy-Main", "broken"}),
        ("source:pg", {"agent:42", "orders"}),
        ("source:postgres", {"agent:42", "orders"}),
        ("source:post", {"agent:42", "orders"}),
        ("source:p", {"agent:42", "orders"}),
        ("source:kernel", {"cron 12:30"}),
        ("source:ke", {"cron 12:30"}),  # "k" alone is kernel or k8s: ambiguous
        # format: substring
        ("format:pg-", {"agent:42", "orders"}),
        ("format:FLOCK", {"cron 12:30"}),
        ("format:fleet", {"Deploy-Main"}),
        # name: name or path
        ("name:deploy", {"Deploy-Main"}),
        ("name:/var/locks", {"Deploy-Main", "broken"}),
        ("name:.lck", {"cron 12:30"}),
        ("name:agent:42", {"agent:42"}),
        # holder: pid, host, actor, session, operation, pg backend user/application
        ("holder:424", {"Deploy-Main"}),
        ("holder:tower", {"Deploy-Main"}),
        ("holder:alice", {"Deploy-Main"}),
        ("holder:req-77", {"Deploy-Main"}),
        ("holder:rolling", {"Deploy-Main"}),
        ("holder:billing", {"agent:42"}),
        ("holder:reporter", {"orders"}),
        ("holder:nightly", {"orders"}),
        ("holder:777", {"orders"}),
        ("holder:12", {"cron 12:30"}),
        # host: holder.host only
        ("host:tower-01", {"Deploy-Main"}),
        ("host:10.0.0", {"agent:42"}),
        ("host:alice", set()),
        # pid: exact, holder or backend
        ("pid:4242", {"Deploy-Main"}),
        ("pid:424", set()),
        ("pid:9001", {"agent:42"}),
        ("pid:777", {"orders"}),
        ("pid:0123", {"cron 12:30"}),
        # actor: holder.actor only
        ("actor:ALI", {"Deploy-Main"}),
        ("actor:app_", {"agent:42"}),
        ("actor:reporter", set()),
        # reason: any code of the verdict
        ("reason:heartbeat", {"Deploy-Main"}),
        ("reason:scope_conflict", {"Deploy-Main"}),
        ("reason:idle", {"agent:42"}),
        ("reason:schema", {"broken"}),
        ("reason:waiting", {"orders"}),
    ],
)
def test_fields(text: str, expected: set[str]) -> None:
    assert hits(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("deploy", {"Deploy-Main"}),  # name
        ("/run/lock", {"cron 12:30"}),  # path
        ("generic", {"broken"}),  # format
        ("4242", {"Deploy-Main"}),  # holder pid
        ("tower-01.lan", {"Deploy-Main"}),  # host
        ("alice", {"Deploy-Main"}),  # actor
        ("req-77", {"Deploy-Main"}),  # session
        ("rolling deploy", {"Deploy-Main"}),  # two terms, both found in the same lock
        ("nightly", {"orders"}),  # pg application
        ("reporter", {"orders"}),  # pg user
        ("777", {"orders"}),  # pg backend pid
        ("stale", {"agent:42"}),  # state word
        ("invalid", {"broken"}),
        ("scope_conflict", {"Deploy-Main"}),  # reason code
        ("heartbeat", {"Deploy-Main"}),
        ("nothing-like-this", set()),
    ],
)
def test_free_text(text: str, expected: set[str]) -> None:
    assert hits(text) == expected


@pytest.mark.parametrize("text", ["DEPLOY", "Deploy", "deploy", "dEpLoY", "NAME:DEPLOY"])
def test_case_does_not_matter(text: str) -> None:
    assert hits(text) == {"Deploy-Main"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("!state:active", {"agent:42", "orders", "broken"}),
        ("!source:pg", {"Deploy-Main", "cron 12:30", "broken"}),
        ("!deploy", ALL - {"Deploy-Main"}),
        ("!pid:4242", ALL - {"Deploy-Main"}),
        ("!host:tower", ALL - {"Deploy-Main"}),  # no host at all also counts as "not tower"
        ("!reason:heartbeat", ALL - {"Deploy-Main"}),
        ("!nothing-like-this", ALL),
    ],
)
def test_negation(text: str, expected: set[str]) -> None:
    assert hits(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("source:file state:active", {"Deploy-Main"}),
        ("source:file !state:active", {"broken"}),
        ("state:active !source:file", {"cron 12:30"}),
        ("source:pg holder:billing", {"agent:42"}),
        ("source:pg state:active", set()),
        ("  lock   source:file \t state:invalid ", {"broken"}),
    ],
)
def test_all_terms_must_match(text: str, expected: set[str]) -> None:
    assert hits(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name:"cron 12"', {"cron 12:30"}),
        ('"cron 12:30"', {"cron 12:30"}),
        ('"rolling deploy"', {"Deploy-Main"}),  # one needle, found in the operation
        ('"deploy rolling"', set()),  # one needle, found nowhere
        ('!"cron 12"', ALL - {"cron 12:30"}),
        ('holder:"Rolling Deploy"', {"Deploy-Main"}),
    ],
)
def test_quotes_group_words(text: str, expected: set[str]) -> None:
    assert hits(text) == expected


def test_quoted_text_is_one_term() -> None:
    assert parse('name:"my lock" "two words"').terms == (
        Term("name", "my lock"),
        Term(None, "two words"),
    )


def test_apostrophes_are_plain_text() -> None:
    assert parse("o'brien don't").terms == (Term(None, "o'brien"), Term(None, "don't"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("agent:42", {"agent:42"}),  # prefix "agent" is no field: free text
        ("12:30", {"cron 12:30"}),
        ("pg:db:advisory", set()),
        (":42", {"agent:42"}),
        ("!12:30", ALL - {"cron 12:30"}),
    ],
)
def test_colon_with_unknown_prefix_is_free_text(text: str, expected: set[str]) -> None:
    (term,) = parse(text).terms
    assert term.field is None
    assert hits(text) == expected


def test_terms_are_canonical() -> None:
    assert parse("!state:ST source:pg pid:007 Name:Foo Bar").terms == (
        Term("state", "stale", negated=True),
        Term("source", "postgres"),
        Term("pid", "7"),
        Term("name", "foo"),
        Term(None, "bar"),
    )


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_empty_query_matches_everything(text: str) -> None:
    query = parse(text)
    assert query.empty
    assert query.terms == ()
    assert hits(text) == ALL


def test_everything() -> None:
    assert parse("") == EVERYTHING
    assert EVERYTHING.empty
    assert all(EVERYTHING.matches(lock, verdict) for lock, verdict in ROWS)


def test_query_keeps_the_text_as_typed() -> None:
    text = '  State:St  name:"my lock" '
    query = parse(text)
    assert query.text == text
    assert not query.empty
    assert isinstance(query, Query)


def test_fields_name_every_field() -> None:
    assert set(FIELDS) == {
        "state",
        "source",
        "format",
        "name",
        "holder",
        "host",
        "pid",
        "actor",
        "reason",
    }
    assert all(FIELDS.values())


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # bad state: names it and lists the valid ones
        ("state:zombie", ["zombie", "active", "stale", "invalid", "waiting"]),
        ("!state:x", ["'x'", "active, stale, invalid, waiting"]),
        # bad source
        ("source:s3", ["s3", "file", "pg", "postgres", "kernel"]),
        # bad pid
        ("pid:abc", ["pid", "whole number", "'abc'"]),
        ("pid:-5", ["pid", "whole number", "'-5'"]),
        ("pid:4.2", ["pid", "whole number"]),
        ("pid:²", ["pid", "whole number"]),
        ("pid:" + "9" * 5000, ["too large"]),
        # empty value
        ("state:", ["state", "needs a value", "state:stale"]),
        ("!source:", ["source", "needs a value"]),
        ('name:""', ["name", "needs a value"]),
        ("pid:", ["pid", "needs a value"]),
        # lone !
        ("!", ["lone !"]),
        ("state:stale !", ["lone !"]),
        # two !s: not a term without `!state:stale` in it (which is every lock)
        ("!!state:stale", ["!! negates twice", "!state:active"]),
        ("!!", ["!! negates twice"]),
        # empty quotes
        ('""', ["empty quotes"]),
        # unbalanced quote
        ('"cron', ["unbalanced quote"]),
        ('name:"my lock', ["unbalanced quote"]),
        ('deploy "', ["unbalanced quote"]),
        # trailing backslash
        ("deploy \\", ["backslash"]),
    ],
)
def test_errors_say_what_is_wrong(text: str, says: list[str]) -> None:
    with pytest.raises(QueryError) as caught:
        parse(text)
    message = str(caught.value)
    assert "\n" not in message
    for part in says:
        assert part in message


def test_query_error_is_a_value_error() -> None:
    assert issubclass(QueryError, ValueError)


@given(st.text())
def test_parse_raises_only_query_error(text: str) -> None:
    try:
        query = parse(text)
    except QueryError as error:
        assert str(error)
        assert "\n" not in str(error)
        return
    assert query.text == text
    for lock, verdict in ROWS:
        assert isinstance(query.matches(lock, verdict), bool)


@given(st.lists(st.sampled_from(['"', "!", ":", " ", "\\", "state", "pid", "x", "1", "'"])))
def test_parse_raises_only_query_error_on_syntax_soup(parts: list[str]) -> None:
    with contextlib.suppress(QueryError):
        parse("".join(parts))


def test_the_help_names_every_state_and_source_the_filter_takes() -> None:
    """`?` lists the filter's fields: every state and every source spelling the
    parser takes is named there (it once named four states and three sources)."""
    named = query.fields(SOURCES)
    for state in State:
        assert state.value in named["state"]
        assert parse(f"state:{state.value}").terms[0].value == state.value
    for typed in SOURCES:
        assert typed in named["source"].replace("/", " ").replace(",", " ").split()
