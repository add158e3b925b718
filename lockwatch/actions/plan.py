"""What an action would do, worked out before anything is touched.

A Plan is what the confirmation shows (the dashboard's modal, the CLI's
prompt): the lock as the operator saw it, the exact effect in words, whether
the operator must type the lock's name (`--force`) because it is not stale, or
why the action cannot be done at all. Each source plans its own actions (its
`Source.actions` provider); this module only finds the provider.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.action import Asked, Kind, Plan, refused
from lockwatch.model.events import holder_text
from lockwatch.model.handover import NewHolder
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict

if TYPE_CHECKING:
    from lockwatch.sources.contract import ActionProvider, Source

__all__ = ["Kind", "Plan", "describe", "plan", "provider", "refused", "tombstone_place"]


def source_of(lock: Lock) -> Source | None:
    """The source whose id the lock has (another host's lock: the remote source),
    else the one named by its `source`."""
    from lockwatch.sources.registry import by_name, for_id

    return for_id(lock.id) or by_name(lock.source)


def provider(lock: Lock) -> ActionProvider | None:
    """What can be done to `lock`, and how: its source's actions provider."""
    source = source_of(lock)
    return None if source is None else source.actions


def provider_named(name: str) -> ActionProvider | None:
    """Source `name`'s actions provider (`Asked.providers`: a source whose action
    is another's asks for it by name)."""
    from lockwatch.sources.registry import by_name

    source = by_name(name)
    return None if source is None else source.actions


def tombstone_place(tombstone_dir: str | None) -> str:
    """Where broken locks go, in words: the configured directory, or the default
    beside each lock."""
    from lockwatch.sources.registry import SOURCES

    # The first source whose breaks move locks aside says where (the files
    # source, first in the registry: no other source's plugin is loaded for it).
    places = (
        source.actions.tombstone_place(tombstone_dir)
        for source in SOURCES
        if source.actions is not None
    )
    return next((place for place in places if place is not None), "")


def plan(
    kind: Kind,
    lock: Lock,
    verdict: Verdict,
    *,
    peers: Sequence[Lock] = (),
    new_holder: NewHolder | None = None,
    tombstone_dir: str | None = None,
    held: bool = False,
    held_elsewhere: bool = False,
    given: Mapping[str, Any] | None = None,
    **more: Any,
) -> Plan:
    """The plan for `kind` on `lock` as judged by `verdict`. `peers` are the other
    locks in view (a session's other locks count in its effect); `held` says
    whether lockwatch holds this lock (release needs it), `held_elsewhere` that
    another lockwatch process holds it (a steal held in a foreground CLI).
    `given` (and any other keyword): what particular sources read, by name (the
    command's option values: `signal=`)."""
    actions = provider(lock)
    if actions is None:
        return refused(
            kind, lock, verdict, "unsupported", f"{lock.source} locks cannot be acted on"
        )
    asked = Asked(
        peers=peers,
        new_holder=new_holder,
        tombstone_dir=tombstone_dir,
        held=held,
        held_elsewhere=held_elsewhere,
        given={**(given or {}), **more},
        providers=provider_named,
    )
    return actions.plan(kind, lock, verdict, asked)


def describe(plan: Plan, now: datetime) -> list[tuple[str, str]]:
    """The confirmation's lines: what the operator is about to act on, `now`
    (the dashboard's clock: a replay's time, never the wall clock's)."""
    lock, verdict = plan.lock, plan.verdict
    actions = provider(lock)
    reasons = "; ".join(f"{r.code}: {r.message}" for r in verdict.reasons) or "none"
    where = (actions.where(lock) if actions is not None else None) or lock.id
    lines = [
        ("lock", f"{lock.name} ({lock.format}, {lock.source})"),
        ("where", lock.path or where),
        ("holder", holder_text(lock) or "none recorded"),
        ("state", verdict.state.value),
        ("reasons", reasons),
        ("effect", plan.effect),
    ]
    if verdict.age_seconds is not None:
        lines.insert(4, ("age", duration(verdict.age_seconds)))
    elif actions is not None:
        for row in reversed(actions.confirm_rows(lock, verdict, now)):
            lines.insert(4, row)
    if plan.why_name:
        lines.append(("confirm", f"{plan.why_name}: type its name to go ahead"))
    if lock.sha256:
        lines.append(("sha256", lock.sha256))
    return lines
