"""`lockwatch why --at T "<error>"`: the answer from the recorded history at T
(issue 44, item 3): the episode that was going on then and that the text points
at (a pid it names, a relation or lock name, else any wait at that moment, worst
first), who blocked, how many waited from when to when, and how it ended.

Without --at, a timestamp in the pasted text (a server log line's) is used when
it is in the past and the history has an episode then; otherwise `why` looks at
the present as it always did."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import click
import orjson

from lockwatch.model.clues import Clue, ClueKind
from lockwatch.model.history import Episode
from lockwatch.model.text import terminal_safe

# An error is logged when the wait ends: the episode may have ended just before.
SLACK = timedelta(seconds=5)
# A timestamp this recent is the present: `why` looks at the live locks.
RECENT = timedelta(seconds=60)


def _covers(episode: Episode, at: datetime) -> bool:
    end = episode.end
    return episode.start - SLACK <= at and (end is None or at <= end + SLACK)


def _points_at(episode: Episode, clues: Sequence[Clue]) -> int:
    """How surely the text names this episode: 2 a pid in it, 1 its resource, 0 none."""
    best = 0
    pids = {w.pid for w in episode.waiters} | {episode.blocker.pid}
    for clue in clues:
        if clue.kind is ClueKind.PID and clue.value.isdigit() and int(clue.value) in pids:
            best = max(best, 2)
        elif clue.kind is ClueKind.NAME and clue.value and clue.value in episode.resource:
            best = max(best, 1)
    return best


def matching(episodes: Sequence[Episode], clues: Sequence[Clue], at: datetime) -> list[Episode]:
    """The episodes going on at `at`, those the text names first."""
    going = [e for e in episodes if _covers(e, at) and e.waiters]
    named = [e for e in going if _points_at(e, clues)]
    if named:
        return sorted(named, key=lambda e: -_points_at(e, clues))
    if any(c.kind in (ClueKind.PID, ClueKind.NAME) for c in clues):
        return []
    return going


def sentence(episode: Episode, at: datetime) -> str:
    from lockwatch.history.document import blocker_words, clock, ending_words

    waited = len(episode.waiters)
    ended = ending_words(episode)
    tail = "it is still going on" if episode.end is None else f"it ended: {ended}"
    return (
        f"at {clock(at)} {blocker_words(episode.blocker, at)} held the lock on"
        f" {episode.resource} ({episode.source} {episode.server}) that"
        f" {waited} session{'s' if waited != 1 else ''} waited for,"
        f" {clock(episode.start)}-{clock(episode.end)}; {tail}"
    )


def answer(
    text: str,
    clues: Sequence[Clue],
    at_text: str | None,
    history_path: str | None,
    *,
    as_json: bool,
) -> bool:
    """Print the history's answer and return True; False: nothing to say from
    the history (only when --at was not given: the live look goes on)."""
    from lockwatch.cli.ending import fail
    from lockwatch.cli.history import EXIT_NO_HISTORY, open_reader, when
    from lockwatch.history.api import HistoryError
    from lockwatch.model.when import found_in

    now = datetime.now().astimezone()
    if at_text is not None:
        at = when(at_text, "--at")
        assert at is not None
        store = open_reader(history_path)
    else:
        stamp = found_in(text, now, now.tzinfo)
        if stamp is None or stamp > now - RECENT:
            return False
        at = stamp
        from lockwatch.cli.history import configured_target
        from lockwatch.history.api import open_history

        try:
            store = open_history(configured_target(history_path))
        except HistoryError:
            return False
    try:
        found = matching(store.episodes(at - timedelta(hours=1), at + SLACK), clues, at)
    except HistoryError as exc:
        if at_text is None:
            return False
        fail(str(exc), EXIT_NO_HISTORY)
    if not found and at_text is None:
        return False
    _say(found, at, text, as_json)
    return True


def _say(found: list[Episode], at: datetime, text: str, as_json: bool) -> None:
    from lockwatch.cli.ending import finish
    from lockwatch.history.document import episode_json
    from lockwatch.model.timestamps import format_timestamp

    if as_json:
        document: dict[str, Any] = {
            "schema": "lockwatch.why/1",
            "as_of": format_timestamp(at, precise=False),
            "text": text,
            "episodes": [episode_json(e) for e in found],
        }
        click.echo(orjson.dumps(document).decode())
        finish(0 if found else 1)
    if not found:
        click.echo(terminal_safe(f"Nothing recorded was waiting at {at.astimezone():%H:%M:%S}."))
        finish(1)
    for episode in found[:3]:
        click.echo(terminal_safe(sentence(episode, at)))
        click.echo(f"  (lockwatch history show {episode.id})")
    finish(0)
