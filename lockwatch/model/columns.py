"""What the lock table's shared columns say of one lock: the dashboard's table
(`ui/cells.py`) and `lockwatch ls`'s (`cli/table.py`) both take STATE, FORMAT,
NAME, HOLDER, AGE and OPERATION from here, so they never say two things of one
lock (issue 46: `ls --pg` named a session by pid where the dashboard said
`migrate`). Each table keeps only how it lays them out: widths, its blank mark,
colours.

Pure text, not yet sanitised: `Said.fit` passes it through the one sanitiser.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lockwatch.model.events import kernel_holders
from lockwatch.model.holder import pid_here
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.text import terminal_safe
from lockwatch.model.verdict import Verdict

# The titles both tables give the columns they share.
TITLES = {
    "state": "STATE",
    "format": "FORMAT",
    "name": "NAME",
    "holder": "HOLDER",
    "operation": "OPERATION",
    "age": "AGE",
}
ELLIPSIS = "…"
# Where a holder's name is cut in its middle, its last part after one of these
# is kept whole when it fits: `lockwatch-demo-67f5e5a2/migrate` → `lockw…/migrate`.
_SEPARATORS = "/:@ "


@dataclass(frozen=True, slots=True)
class Said:
    """A cell's text, and the holder's name it starts with (empty: none): where
    the text is cut to a width, the name keeps both its ends, since a common
    prefix (`lockwatch-demo-67f5e5a2/…`) tells no two holders apart."""

    text: str
    name: str = ""

    def fit(self, width: int) -> str:
        """The text sanitised and cut to at most `width` characters, ending in
        "…" where cut; a name keeps its end, and the rest at least a third."""
        text = terminal_safe(self.text)
        if len(text) <= width:
            return text
        name = terminal_safe(self.name)
        if not name or not text.startswith(name):
            return _cut_end(text, width)
        rest = text[len(name) :]
        room = min(len(name), width - min(len(rest), width // 3))
        last = _last_part(name)
        if last:  # the end of a name says most: whole, where the rest keeps a word
            room = max(room, min(len(last) + 1, width - min(len(rest), 6)))
        shown = _cut_middle(name, room)
        return shown + _cut_end(rest, width - len(shown))


def _cut_end(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: width - 1] + ELLIPSIS if width > 0 else ""


def _last_part(name: str) -> str:
    """What follows the last separator in `name` ("" where there is none)."""
    cut = max(name.rfind(mark) for mark in _SEPARATORS)
    return name[cut + 1 :] if cut > 0 else ""


def _cut_middle(name: str, width: int) -> str:
    """`name` in `width` characters: its start, "…", and its end, the last part
    after a separator whole where that fits, else the larger half."""
    if len(name) <= width:
        return name
    if width <= 1:
        return ELLIPSIS[:width]
    cut = max(name.rfind(mark) for mark in _SEPARATORS)
    for tail in (name[cut:], name[cut + 1 :]) if cut > 0 else ():
        if tail and len(tail) <= width - 1:
            return name[: width - 1 - len(tail)] + ELLIPSIS + tail
    head = (width - 1) // 2
    return name[:head] + ELLIPSIS + name[len(name) - (width - 1 - head) :]


def holder(lock: Lock, verdict: Verdict) -> Said:
    """Who holds it and, for a session, what it is doing (its state and query,
    which change while the holder stays: events compare `holder_text` instead).
    Empty where nobody is known."""
    facts = lock.facts
    if facts is not None:
        said = facts.holder_cell(lock)
        if said is not None:
            return Said(said, facts.holder_name(lock) or "")
        said = facts.holder_text(lock)
        if said is not None:
            return Said(said)
    kernel = kernel_holders(lock)  # a kernel lock on the file: who, by command
    if kernel is not None:
        return Said(kernel)
    return Said(_recorded(lock, verdict))


def _recorded(lock: Lock, verdict: Verdict) -> str:
    """`pid@host actor` as the lock records it, the pid as this host numbers it
    (a container's, followed), and `(dead)` where its process is gone."""
    pid = pid_here(lock, verdict)
    host = lock.holder.host
    place = (f"{pid}@{host}" if host else str(pid)) if pid is not None else host and f"@{host}"
    text = " ".join(part for part in (place, lock.holder.actor) if part)
    if text and verdict.alive is False:
        text += " (dead)"
    return text


def age(lock: Lock, verdict: Verdict, now: datetime) -> str:
    """How long it has been held (a waiter: has waited), as of `now`; where the
    lock keeps no such time, the bound its facts know (`≥ 3m12s`), else the age
    its verdict found. Empty where nobody knows."""
    facts = lock.facts
    start = lock.acquired_at
    if facts is not None:
        start = facts.waiting_since(lock) or start
        if start is None:
            bound = facts.age_bound(lock, now)
            if bound is not None:
                return bound
    if start is not None:
        return duration(max(0.0, (now - start).total_seconds()))
    if verdict.age_seconds is not None:
        return duration(verdict.age_seconds)
    return ""


def operation(lock: Lock) -> str:
    facts = lock.facts
    said = None if facts is None else facts.operation(lock)
    if said is not None:
        return said
    return lock.holder.operation or lock.holder.session or ""


def text(key: str, lock: Lock, verdict: Verdict, now: datetime) -> str:
    """The unsanitised text of shared column `key` (one of `TITLES`)."""
    if key == "state":
        return verdict.state.value
    if key == "format":
        return lock.format
    if key == "name":
        return lock.name
    if key == "holder":
        return holder(lock, verdict).text
    if key == "operation":
        return operation(lock)
    if key == "age":
        return age(lock, verdict, now)
    raise KeyError(key)
