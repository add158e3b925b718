"""The dashboard's filter language: the `/` box and the `--filter` option.

Whitespace-separated terms, all of which must match. A term is free text
(searched in name, path, format, holder, host, state and reason codes) or
`field:value`; a leading `!` negates it. Double quotes group words with spaces:
`name:"my lock"`. Matching ignores case and looks for substrings unless a field
says otherwise (`state:`, `source:` and `pid:` are exact).

Everything a term needs is worked out by `parse`, once, so `Query.matches` is
cheap enough to run over every lock each time the filter changes.

The model knows no source: what `source:` takes (names, short names) is the
registry's, handed to `parse` by its caller (`registry.source_names()`), and
what a lock's source knows beyond the generic fields is asked of its facts.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict

Predicate = Callable[[Lock, Verdict], bool]


class QueryError(ValueError):
    """A filter that cannot be parsed; the message is one line, shown under the filter box."""


_STATES: Mapping[str, str] = MappingProxyType({state.value: state.value for state in State})
# What the operator may type for `source:` -> the Lock.source it means (a
# source's name, its short name): the registry's, passed in by whoever parses.
SourceNames = Mapping[str, str]


def _either(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _source_names(sources: SourceNames) -> list[str]:
    """What may be typed for each source: `pg/postgres`."""
    by_source: dict[str, list[str]] = {}
    for typed, source in sources.items():
        by_source.setdefault(source, []).append(typed)
    return ["/".join(names) for names in by_source.values()]


# What `?` teaches: built from what the parser takes, so the two cannot drift.
FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "state": f"exact state: {_either(list(_STATES))} (a prefix will do)",
        "source": "where the lock comes from: a source's name or short name",
        "format": "part of the lock format's name",
        "name": "part of the lock's name or path",
        "holder": "part of the holder: pid, host, actor, session, operation, a session's"
        " user/application",
        "host": "part of the holder's host, or of the host a remote lock is on",
        "pid": "the holder's pid, exactly",
        "actor": "part of the holder's actor",
        "reason": "part of a reason code, e.g. heartbeat or scope_conflict",
    }
)


def fields(sources: SourceNames) -> Mapping[str, str]:
    """`FIELDS`, with the sources `source:` takes named (`sources`: as `parse`'s)."""
    named = dict(FIELDS)
    named["source"] = f"where the lock comes from: {_either(_source_names(sources))}"
    return MappingProxyType(named)


# One example per field, so the error for a bare `field:` shows what a value looks like.
_EXAMPLES: Mapping[str, str] = MappingProxyType(
    {
        "state": "state:stale",
        "source": "source:pg",
        "format": "format:tower",
        "name": 'name:"my lock"',
        "holder": "holder:alice",
        "host": "host:tower-01",
        "pid": "pid:4242",
        "actor": "actor:alice",
        "reason": "reason:heartbeat",
    }
)

_DIGITS = frozenset("0123456789")


@dataclass(frozen=True, slots=True)
class Term:
    """One parsed term. `value` is canonical: a lowercase needle, a full state or
    source name, or a pid's digits; `field` is None for free text."""

    field: str | None
    value: str
    negated: bool = False
    _test: Predicate = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_test", _predicate(self.field, self.value))

    def matches(self, lock: Lock, verdict: Verdict) -> bool:
        return self._test(lock, verdict) != self.negated


@dataclass(frozen=True, slots=True)
class Query:
    text: str  # as typed, to put back in the filter box
    terms: tuple[Term, ...]

    def matches(self, lock: Lock, verdict: Verdict) -> bool:
        return all(term.matches(lock, verdict) for term in self.terms)

    @property
    def empty(self) -> bool:
        return not self.terms


def parse(text: str, sources: SourceNames | None = None) -> Query:
    """The query `text` means; QueryError says what is wrong with it. `sources`:
    what `source:` takes (typed -> source name: `registry.source_names()`);
    None: a source's exact name, unchecked."""
    return Query(text, tuple(_term(word, sources) for word in _split(text)))


def _split(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    # Only double quotes group: an apostrophe (O'Brien, don't) is plain text.
    lexer.quotes = '"'
    lexer.escapedquotes = '"'
    try:
        return list(lexer)
    except ValueError as error:
        if "quotation" in str(error):
            raise QueryError('unbalanced quote: a " is never closed') from None
        if "escaped" in str(error):
            raise QueryError(r"a trailing \ escapes nothing: write \\ for a backslash") from None
        raise QueryError(f"cannot split the filter: {error}") from None


def _term(word: str, sources: SourceNames | None) -> Term:
    negated = word.startswith("!")
    body = word[1:] if negated else word
    if not body:
        if negated:
            raise QueryError("a lone ! negates nothing: put it before a term, as in !state:active")
        raise QueryError('empty quotes ("") match nothing in particular: remove them')
    if negated and body.startswith("!"):
        # Read as "not containing `!state:stale`", it would match every lock.
        raise QueryError(f"{word[:2]} negates twice: one ! negates a term, as in !state:active")
    prefix, colon, value = body.partition(":")
    field = prefix.lower()
    if not colon or field not in FIELDS:
        # `pg:db:advisory` or `12:30` is something to look for, not a mistyped field.
        return Term(None, body.lower(), negated)
    if not value:
        raise QueryError(f"{field}: needs a value, as in {_EXAMPLES[field]}")
    if field == "state":
        return Term(field, _resolve("state", value, _STATES), negated)
    if field == "source":
        if sources is None:
            return Term(field, value.lower(), negated)
        return Term(field, _resolve("source", value, sources), negated)
    if field == "pid":
        # isascii: str.isdigit also accepts digits int() rejects (superscripts).
        if not (value.isascii() and value.isdigit()):
            raise QueryError(f"pid: needs a whole number, not {value!r}")
        # Pids fit in 32 bits; the bound also keeps int() clear of its digit limit.
        if len(value.lstrip("0")) > 10:
            raise QueryError(f"pid: {value} is too large to be a pid")
        return Term(field, str(int(value)), negated)
    return Term(field, value.lower(), negated)


def _resolve(field: str, value: str, names: Mapping[str, str]) -> str:
    """The canonical name `value` (a name, an alias or an unambiguous prefix) means.

    `names` maps what may be typed to the canonical name it stands for.
    """
    typed = value.lower()
    if typed in names:
        return names[typed]
    meant = sorted({names[name] for name in names if name.startswith(typed)})
    if len(meant) == 1:
        return meant[0]
    valid = ", ".join(names)
    if meant:
        raise QueryError(f"{field}:{value} is ambiguous ({', '.join(meant)}): use one of {valid}")
    raise QueryError(f"unknown {field} {value!r}: use one of {valid}")


def _predicate(field: str | None, needle: str) -> Predicate:
    """The test a term runs, with its needle bound so nothing is recomputed per lock."""
    match field:
        case None:
            return _free_text(needle)
        case "state":
            return lambda lock, verdict: verdict.state == needle
        case "source":
            return lambda lock, verdict: lock.source == needle
        case "format":
            return lambda lock, verdict: needle in lock.format.lower()
        case "name":
            return lambda lock, verdict: _in_name(needle, lock)
        case "holder":
            numeric = _numeric(needle)
            return lambda lock, verdict: _in_holder(needle, numeric, lock)
        case "host":
            # The holder's host, or the host another host's lock is on (--remote).
            return lambda lock, verdict: (
                _contains(lock.holder.host, needle)
                or (lock.facts is not None and _contains(lock.facts.remote_host(), needle))
            )
        case "actor":
            return lambda lock, verdict: _contains(lock.holder.actor, needle)
        case "pid":
            number = int(needle)
            return lambda lock, verdict: (
                lock.holder.pid == number
                or (lock.facts is not None and lock.facts.matches_pid(number))
            )
        case "reason":
            return lambda lock, verdict: _in_reasons(needle, verdict)
    raise ValueError(f"no such field: {field!r}")


def _free_text(needle: str) -> Predicate:
    numeric = _numeric(needle)

    def test(lock: Lock, verdict: Verdict) -> bool:
        # Cheapest and likeliest first: most filters are typed to find a name.
        return (
            _in_name(needle, lock)
            or needle in lock.format.lower()
            or needle in verdict.state  # State values are lowercase words
            or _in_holder(needle, numeric, lock)
            or _in_reasons(needle, verdict)
        )

    return test


def _numeric(needle: str) -> bool:
    # Only a needle of digits can be found in a pid: the others skip the str() per lock.
    return bool(needle) and set(needle) <= _DIGITS


def _contains(text: str | None, needle: str) -> bool:
    return text is not None and needle in text.lower()


def _in_name(needle: str, lock: Lock) -> bool:
    return needle in lock.name.lower() or _contains(lock.path, needle)


def _in_holder(needle: str, numeric: bool, lock: Lock) -> bool:
    holder = lock.holder
    if numeric and holder.pid is not None and needle in str(holder.pid):
        return True
    for text in (holder.host, holder.actor, holder.session, holder.operation):
        if text is not None and needle in text.lower():
            return True
    # What its source knows of the holder beyond these (a session's user).
    return lock.facts is not None and lock.facts.matches_text(needle)


def _in_reasons(needle: str, verdict: Verdict) -> bool:
    # Reason codes are snake_case by contract: no lowercasing per lock.
    return any(needle in reason.code for reason in verdict.reasons)


EVERYTHING = parse("")
