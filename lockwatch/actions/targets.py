"""From what the operator pointed at to a plan: one path for the CLI and the
dashboard's action session.

`find` turns a TARGET (a path, or a lock id of any source) into the lock as it
is now; `prepare` works out the plan, after the checks every front end shares
(which actions the lock's source offers), handing the front end's limits (the
watched roots, whose sessions may be touched) to the source's provider.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lockwatch.actions.plan import plan, provider
from lockwatch.model.action import Kind, Plan, refused
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.sources.contract import Found, Source, SourceError, Wanted
from lockwatch.sources.registry import SOURCES, for_id

# What an id's prefix looks like (`pg:`, `mysql:`): a scheme, not a path.
_ID_HEAD = lazy_compile(r"[A-Za-z][A-Za-z0-9_+.-]*")


def source_for(target: str) -> Source:
    """The source TARGET names: by its id's prefix, else the one whose TARGETs
    are paths. Raises SourceError for an id no source has (`mysql:...`): never
    taken for a path, unless a file by that name exists."""
    source = for_id(target)
    if source is not None:
        return source
    head, sep, _ = target.partition(":")
    if sep and _ID_HEAD.fullmatch(head) and not os.path.lexists(target):
        known = ", ".join(f"{s.id_prefix}:" for s in SOURCES)
        raise SourceError(
            f"{target!r}: no source has lock ids starting {head}: (lock ids start with"
            f" {known}); nothing was done"
        )
    return next(s for s in SOURCES if s.actions is not None and s.actions.takes_paths)


def find(target: str, wanted: Wanted, host: str) -> Found | str:
    """The lock TARGET names, judged now; or why there is none (a message).
    Raises SourceError (the TARGET is malformed, or names no source) or
    LookupFailed (the source could not be asked)."""
    return source_for(target).find(target, wanted, host)


def unseen_id(target: str) -> str:
    """The id a TARGET that named no lock is audited under."""
    actions = source_for(target).actions
    return target if actions is None else actions.unseen_id(target)


def prepare(
    kind: Kind,
    lock: Lock,
    verdict: Verdict,
    *,
    roots: Sequence[str] | None = None,
    **asked: Any,
) -> Plan:
    """The plan for `kind` on `lock`, once its source offers `kind`. `roots`: act
    only on lock files under these (the dashboard's watched trees); any other
    keyword is `plan.plan`'s (`peers`, `held`, ...), or else what particular
    sources read by name (the command's option values, a front end's limits:
    `pg_applications`, only sessions whose application_name starts with it, for
    the demo)."""
    actions = provider(lock)
    if actions is None:
        return refused(
            kind, lock, verdict, "unsupported", f"{lock.source} locks cannot be acted on"
        )
    first = actions.screen(kind, lock, verdict)
    if first is not None:
        return first
    if kind not in actions.kinds:
        offered = ", ".join(sorted(k.value for k in actions.kinds)) or "none"
        why = f"{lock.source} locks offer {offered}, not {kind.value}"
        return refused(kind, lock, verdict, "unsupported", why)
    if roots is not None:
        asked["roots"] = tuple(roots)
    return plan(kind, lock, verdict, **asked)
