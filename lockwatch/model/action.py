"""What every source's actions share: the kinds of action, the plan the
operator confirms, what a source is told when it plans or carries one out, and
how it says no.

Pure types, so a source package (`lockwatch/sources/<name>/actions.py`) can
plan and carry out its own actions without importing `lockwatch.actions`,
which only asks each source's provider (`Source.actions`) and audits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from lockwatch.model.handover import NewHolder
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict


class Kind(str):
    """An action's kind, by its name (the audit log's `action`). Which kinds there
    are, and all each needs (its key, command, events, help), is model/kinds.py's
    table (`kinds()` there, in its order): a new kind is one entry there and a
    provider that offers it."""

    __slots__ = ()
    _named: ClassVar[dict[str, Kind]] = {}
    BREAK: ClassVar[Kind]
    STEAL: ClassVar[Kind]
    RELEASE: ClassVar[Kind]
    CANCEL: ClassVar[Kind]

    def __new__(cls, value: str) -> Kind:
        # One object per name, so `kind is Kind.BREAK` holds for a kind parsed anew.
        named = cls._named.get(value)
        if named is None:
            named = cls._named.setdefault(value, super().__new__(cls, value))
        return named

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Kind({self.value!r})"


Kind.BREAK = Kind("break")
Kind.STEAL = Kind("steal")
Kind.RELEASE = Kind("release")
Kind.CANCEL = Kind("cancel")


@dataclass(frozen=True, slots=True)
class Plan:
    kind: Kind
    lock: Lock
    verdict: Verdict
    # The audit event a success records.
    event: str
    # The exact effect, in words.
    effect: str
    # Not stale: the operator must type the lock's name (CLI: --force).
    needs_name: bool = False
    # (code, message) when the action may not be done at all.
    refusal: tuple[str, str] | None = None
    # The bytes a steal writes.
    new_content: bytes | None = None
    # A kernel lock's break: the signal sent to its holders (TERM, KILL), the
    # seconds they have to let go of it, and the signal sent after that to those
    # still holding it (KILL; None: none, the break fails naming them).
    signal: str | None = None
    grace: float | None = None
    then_signal: str | None = None
    # Why the typed name is needed when the lock is stale all the same (staleness
    # only inferred): what the confirmation and the refusal say instead of "not stale".
    why_name: str | None = None
    # Judge the lock again right before acting, unless forced: its staleness rests
    # on this host's processes, and a dead pid can come back.
    recheck: bool = False

    @property
    def verb(self) -> str:
        return self.kind.value


def decoded(content: bytes | None) -> Any:
    """Lock bytes lockwatch wrote, as JSON when they are (the audit log's `new_lock`)."""
    if content is None:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "backslashreplace")


def refused(kind: Kind, lock: Lock, verdict: Verdict, code: str, message: str) -> Plan:
    return Plan(kind, lock, verdict, "action_refused", "nothing", refusal=(code, message))


class ActionRefused(Exception):
    """Nothing was touched: the lock is not as the operator saw it, or may not be
    acted on. `code` is machine-readable (the audit log's `refusal`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ActionFailed(Exception):
    """The action started and could not finish; `message` says what state it left."""

    def __init__(self, code: str, message: str, tombstone: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.tombstone = tombstone


@dataclass(frozen=True)
class Asked:
    """What a source is told when it plans an action on one of its locks."""

    # The other locks in view (a session's other locks count in its effect).
    peers: Sequence[Lock] = ()
    # The operator as a stolen lock records them.
    new_holder: NewHolder | None = None
    tombstone_dir: str | None = None
    # lockwatch holds this lock (release needs it); `held_elsewhere`: another
    # lockwatch process holds it (a steal held in a foreground CLI).
    held: bool = False
    held_elsewhere: bool = False
    # What the front end says to particular sources, by the names their providers
    # read: the action command's option values, a front end's limits.
    given: Mapping[str, Any] = field(default_factory=dict)
    # Another source's actions provider, by the source's name (the front end's
    # registry; None: none given): a source whose action is another's asks it
    # (a lock file's break, where a kernel lock is held on it, is the kernel's).
    providers: Callable[[str], object] | None = None


@dataclass(frozen=True)
class Doing:
    """What a source is told when it carries out a plan."""

    action_id: str
    # `<UTC time of the action>-<action id>`: names what an action keeps aside.
    stamp: str
    # The sha256 the operator saw, if not that of the plan's lock.
    expect_sha256: str | None = None
    # The operator typed the lock's name (CLI: --force).
    force: bool = False
    operator: str = ""
    tombstone_dir: str | None = None
    # What lockwatch holds for this lock (a release lets go of it), if anything.
    held: Any = None
    # How to reach the servers, by the names providers read (the front end's).
    reach: Mapping[str, Any] = field(default_factory=dict)
    # Audit a step at once (an event and its fields), whatever happens next.
    note: Callable[[str, dict[str, Any]], None] = lambda event, fields: None


@dataclass(frozen=True)
class Done:
    """A source's account of an action it carried out."""

    # What the audit log's result record adds.
    details: dict[str, Any]
    message: str
    tombstone: str | None = None
    # A lock lockwatch wrote (a steal): its hash and bytes, for heartbeats.
    new_sha256: str | None = None
    new_content: bytes | None = None
    # What lockwatch now holds for the operator until released (alive(), release(),
    # as_lock(seen), lock_id, name, backend_pid).
    held: Any = None


@dataclass(frozen=True)
class Holding:
    """Whether lockwatch holds a lock for the operator (what `release` may let go of)."""

    held: bool = False
    # Held by another lockwatch process (a foreground steal), not this one.
    elsewhere: bool = False
