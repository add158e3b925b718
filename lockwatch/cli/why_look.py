"""What `lockwatch why` looks at for the clues a text gave, and what it finds
there: the same listings `ls` makes, narrowed to the path, id, pids or names
the clues say (`why.py` says it)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from lockwatch.model.clues import Clue, ClueKind, Match, Sureness, names_lock
from lockwatch.model.verdict import State

if TYPE_CHECKING:
    from lockwatch.config import Config
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict
    from lockwatch.sources.contract import Collected, Source


# Locks said per source looked at: the rest is `ls`'s to list.
MOST = 8


# --- looking --------------------------------------------------------------------


NAMED_PATH = Match(Sureness.CERTAIN, "the path the text names")
NAMED_ID = Match(Sureness.CERTAIN, "the lock id the text names")
# A server's blocker that matches nothing the text names: one of its roots now.
A_ROOT = Match(Sureness.POSSIBLE, "it blocks others now; the text names nothing of it")


@dataclass
class Finding:
    lock: Lock
    verdict: Verdict
    clue: Clue
    # How surely it is the lock the text is about, and what matched.
    match: Match = NAMED_PATH
    # The sessions waiting on its holder (a server's), as its blocking tree names them.
    waiters: tuple[Any, ...] = ()

    @property
    def likely(self) -> bool:
        """Not certain: a guess from the text's table or the server's trees."""
        return self.match.sure is not Sureness.CERTAIN


@dataclass
class Look:
    values: Mapping[str, Any]
    config: Config
    environ: Mapping[str, str]
    now: datetime
    host: str
    findings: list[Finding] = field(default_factory=list)
    looked_at: list[str] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)  # places it may not look at (also looked_at)
    notes: list[str] = field(default_factory=list)  # what was found that is no lock
    warnings: list[str] = field(default_factory=list)

    def run(self, clues: Sequence[Clue]) -> None:
        for clue in clues:
            if clue.kind is ClueKind.PATH:
                self._path(clue)
            elif clue.kind is ClueKind.ID:
                self._id(clue)
        servers: dict[str, list[Clue]] = {}
        for clue in clues:
            if clue.kind in (ClueKind.PID, ClueKind.NAME, ClueKind.HINT) and _looks_up(clue):
                servers.setdefault(clue.source, []).append(clue)
        for name, theirs in servers.items():
            self._server(name, theirs)
        for clue in clues:
            if clue.kind is ClueKind.NOT_A_LOCK:
                self.notes.append(f"not a lock: {clue.advice}")

    # A path: the lock file there (the file source's listing of it), or the
    # kernel's locks on a file that is none.
    def _path(self, clue: Clue) -> None:
        path = os.path.abspath(os.path.expanduser(clue.value))
        try:
            os.lstat(path)
        except PermissionError:
            # A directory on its way lockwatch's user may not search: the file may
            # well be there, held (a root-only admin dir): never "no such file".
            self.unseen.append(
                f"{path}: cannot be looked at: permission denied on the way to it (uid"
                f" {os.geteuid()}); a lock there is unknown to lockwatch, not absent: run as"
                " root or as its owner"
            )
            self.looked_at.append(self.unseen[-1])
            return
        except (OSError, ValueError):  # ValueError: a NUL in the text's "path"
            self.looked_at.append(f"{path}: no such file now (released, removed, or elsewhere)")
            return
        options = dict(clue.options)
        wanted_sources = self._sources(clue.source, options)
        collected = self._collect(wanted_sources, {**options, "paths": (path,)}, (path,))
        places = {path, os.path.realpath(path)}
        is_dir = os.path.isdir(path) and not os.path.islink(path)
        own: list[tuple[Lock, Verdict]] = []
        others: list[tuple[Lock, Verdict]] = []
        for source, part in collected:
            for lock, verdict in part.assessed:
                if not _at(lock.path, places, is_dir):
                    continue
                (own if source.name == clue.source else others).append((lock, verdict))
        looked = f"{path} and the kernel's locks on it" if len(wanted_sources) > 1 else path
        self.looked_at.append(looked)
        judged = [
            pair
            for pair in own
            if pair[1].state is not State.INVALID and "not_a_lock" not in pair[1].codes
        ]
        if clue.lock_file or judged:
            # A lock file's kernel lock is in its own record, and so is a file
            # whose tool's locks lockwatch reads in that tool's words (an SQLite
            # database, dpkg's lock-frontend, any file the kernel holds a lock on).
            others = []
        elif others:
            # A file locks are taken on (a database): the kernel's locks on it are
            # its story, not the file judged as if it were a lock file.
            self.notes.append(
                f"{path} is not a lock file lockwatch knows; the kernel's locks on it are above"
            )
            own = []
        elif own and all(
            verdict.state is State.INVALID or "not_a_lock" in verdict.codes for _, verdict in own
        ):
            said = "; ".join(r.message for _, v in own for r in v.reasons[:1])
            self.notes.append(
                f"{path} is not a lock file lockwatch knows ({said}); no kernel lock on it now"
            )
            own = []
        for lock, verdict in [*own, *others]:
            self.findings.append(Finding(lock, verdict, clue))

    def _id(self, clue: Clue) -> None:
        from lockwatch.actions.targets import find
        from lockwatch.sources.contract import LookupFailed, SourceError, Wanted

        wanted = Wanted((), self.values, self.config, self.environ)
        try:
            found = find(clue.value, wanted, self.host)
        except SourceError as exc:
            raise click.UsageError(str(exc)) from exc
        except LookupFailed as exc:
            self.warnings.append(str(exc))
            self.looked_at.append(f"{clue.value}: its source could not be asked")
            return
        self.looked_at.append(clue.value)
        if isinstance(found, str):
            self.notes.append(found)
            return
        lock, verdict, _ = found
        self.findings.append(Finding(lock, verdict, clue, NAMED_ID))

    def _server(self, name: str, clues: Sequence[Clue]) -> None:
        """A server's locks of the sessions, tables and names `clues` give, and
        their blockers, most surely named first; with nothing named found (only
        a hint: "lock wait timeout"), the roots of its blocking trees that could be it."""
        options = _merged(clue.options for clue in clues)
        chosen = self._sources(name, options)[:1]
        if not chosen:
            return
        source = chosen[0]
        parts = self._collect(chosen, options, ())
        if not parts:
            flag = _first_flag(source)
            self.looked_at.append(
                f"{source.name}: no server to ask (name one with {flag})"
                if flag
                else f"{source.name}: not configured"
            )
            return
        ((_, part),) = parts
        self.warnings.extend(part.warnings)
        assessed = part.assessed
        servers = ", ".join(status.name for status in part.statuses) or source.name
        graph = Graph(assessed)
        named = [clue for clue in clues if clue.kind is not ClueKind.HINT]
        picked = _culprits(graph, _matched(assessed, graph, named))
        asked = _asked(named)
        if not picked:
            hints = [clue for clue in clues if clue.kind is ClueKind.HINT]
            picked = _roots(assessed, graph, hints)
            asked.append("the roots of its blocking trees now")
        elif others := graph.roots() - picked.keys():
            sessions = "session matches" if len(others) == 1 else "sessions match"
            self.notes.append(
                f"{len(others)} other blocking {sessions} nothing the text names on"
                f" {servers}: `lockwatch ls {_first_flag(source)} ...` lists them"
            )
        self.looked_at.append(f"{source.name} {servers}: " + "; ".join(asked))
        shown = self._found(picked, assessed, graph, clues)
        if shown > MOST:
            self.notes.append(
                f"{shown - MOST} more on {servers}: `lockwatch ls {_first_flag(source)}"
                " ...` lists them"
            )

    def _found(
        self,
        picked: Mapping[Any, Match],
        assessed: Sequence[tuple[Lock, Verdict]],
        graph: Graph,
        clues: Sequence[Clue],
    ) -> int:
        """The picked sessions' locks that tell the story, surest first (at most
        MOST of them); how many there were."""
        clue = next((c for c in clues if c.kind is not ClueKind.HINT), clues[0])
        names = [c.value for c in clues if c.kind is ClueKind.NAME]
        pairs = [pair for pair in assessed if graph.holder_of(pair[0]) in picked]
        shown = sorted(_few(pairs, names), key=lambda pair: picked[graph.holder_of(pair[0])].rank)
        for lock, verdict in shown[:MOST]:
            node = graph.holder_of(lock)
            waiting = sorted(graph.waiters.get(node, ()), key=str)
            self.findings.append(Finding(lock, verdict, clue, picked[node], tuple(waiting)))
        return len(shown)

    def _sources(self, name: str, options: Mapping[str, Any]) -> list[Source]:
        """The source `name`, then those `options` ask for (the kernel's word on a file)."""
        from lockwatch.sources.registry import SOURCES

        first = [source for source in SOURCES if source.name == name]
        rest = [s for s in SOURCES if s.name != name and options and s.asked(options)]
        return first + rest

    def _collect(
        self, sources: Sequence[Source], options: Mapping[str, Any], paths: tuple[str, ...]
    ) -> list[tuple[Source, Collected]]:
        from lockwatch.sources.contract import ListingRequest, SourceError, Wanted

        values = {**self.values, **options}
        wanted = Wanted(paths, values, self.config, self.environ, others_asked=not paths)
        request = ListingRequest(self.now, self.host, False, 1)
        out = []
        for source in sources:
            try:
                selected = source.select(wanted)
            except SourceError as exc:
                raise click.UsageError(str(exc)) from exc
            if selected is not None:
                out.append((source, selected.collect(request)))
        return out


class Graph:
    """Who waits on whom among one server's locks, as their facts say it."""

    def __init__(self, assessed: Sequence[tuple[Lock, Verdict]]) -> None:
        self.blockers: dict[Any, set[Any]] = {}
        self.waiters: dict[Any, set[Any]] = {}
        for lock, _ in assessed:
            waits = None if lock.facts is None else lock.facts.waits()
            if waits is None:
                continue
            waiter, blockers = waits
            self.blockers.setdefault(waiter, set()).update(blockers)
            for blocker in blockers:
                self.waiters.setdefault(blocker, set()).add(waiter)

    @staticmethod
    def holder_of(lock: Lock) -> Any:
        return None if lock.facts is None else lock.facts.holds_as()

    def nodes_of(self, lock: Lock) -> list[Any]:
        """The sessions `lock` is of: its holder, or its waiter."""
        if lock.facts is None:
            return []
        waits = lock.facts.waits()
        nodes = [lock.facts.holds_as(), None if waits is None else waits[0]]
        return [node for node in nodes if node is not None]

    def roots(self) -> set[Any]:
        """Blockers that wait on nobody: ending one frees its whole chain."""
        return {node for node in self.waiters if not self.blockers.get(node)}


def _looks_up(clue: Clue) -> bool:
    """Whether the clue's source has locks to look up by it (a server's), rather
    than a message a file's path already answers (apt's pid)."""
    from lockwatch.sources.registry import by_name

    source = by_name(clue.source)
    return source is not None and source.sees_waits and source.wait_metrics is not None


def _merged(options: Iterable[tuple[tuple[str, Any], ...]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for pairs in options:
        for key, value in pairs:
            before = merged.get(key)
            if isinstance(value, tuple) and isinstance(before, tuple):
                merged[key] = tuple(dict.fromkeys((*before, *value)))
            else:
                merged[key] = value
    return merged


def _first_flag(source: Source) -> str | None:
    """The source's first option's flag and what it takes (`--pg DSN`, `--zk
    HOST:PORT[,...][/CHROOT]`), from its click options."""

    def probe() -> None: ...

    decorated: Any = probe
    for decorator in source.options():
        decorated = decorator(decorated)
    for param in getattr(decorated, "__click_params__", []):
        if isinstance(param, click.Option) and param.opts:
            return f"{param.opts[0]} {param.metavar}" if param.metavar else str(param.opts[0])
    return None


def _at(path: str | None, places: set[str], is_dir: bool) -> bool:
    if path is None:
        return False
    if path in places:
        return True
    return is_dir and any(path.startswith(place.rstrip("/") + "/") for place in places)


def _asked(named: Sequence[Clue]) -> list[str]:
    pids = sorted({int(clue.value) for clue in named if clue.kind is ClueKind.PID})
    names = list(dict.fromkeys(clue.value for clue in named if clue.kind is ClueKind.NAME))
    asked = []
    if pids:
        asked.append("sessions " + ", ".join(str(pid) for pid in pids))
    if names:
        asked.append("locks on " + ", ".join(names))
    return asked


def _better(into: dict[Any, Match], node: Any, match: Match) -> None:
    """Keep `match` for `node` if it is surer than what it has."""
    if node not in into or match.rank < into[node].rank:
        into[node] = match


def _matched(
    assessed: Sequence[tuple[Lock, Verdict]], graph: Graph, named: Sequence[Clue]
) -> dict[Any, Match]:
    """Each session one of whose locks the named clues lead to, with the surest match."""
    out: dict[Any, Match] = {}
    for lock, _ in assessed:
        if lock.facts is None:
            continue
        for clue in named:
            match = lock.facts.named_by(lock, clue)
            if match is not None:
                for node in graph.nodes_of(lock):
                    _better(out, node, match)
    return out


def _culprits(graph: Graph, matched: Mapping[Any, Match]) -> dict[Any, Match]:
    """Of the matched sessions, those others wait on, and whoever they wait on
    themselves (as surely as what matched the waiter); else all of them."""
    out: dict[Any, Match] = {}
    for node, match in matched.items():
        if graph.waiters.get(node):
            _better(out, node, match)
        for blocker in graph.blockers.get(node, ()):
            _better(out, blocker, Match(match.sure, f"it blocks {node}: {match.matched}"))
    return out or dict(matched)


def _roots(
    assessed: Sequence[tuple[Lock, Verdict]], graph: Graph, hints: Sequence[Clue]
) -> dict[Any, Match]:
    """The roots of the blocking trees that what the text says could be about (a
    lock wait timeout is never a named lock's), each as a possibility."""
    roots = graph.roots()
    out: dict[Any, Match] = {}
    for lock, _ in assessed:
        node = graph.holder_of(lock)
        if node not in roots or lock.facts is None:
            continue
        matches = [lock.facts.named_by(lock, hint) for hint in hints] or [A_ROOT]
        for match in matches:
            if match is not None:
                _better(out, node, match)
    return out


def _few(pairs: list[tuple[Lock, Verdict]], names: Sequence[str]) -> list[tuple[Lock, Verdict]]:
    """Per session, the locks that tell the story: those others wait on, those it
    waits for, those named; else its first."""
    by_session: dict[Any, list[tuple[Lock, Verdict]]] = {}
    for lock, verdict in pairs:
        key = lock.facts.session_key() if lock.facts is not None else None
        by_session.setdefault(key if key is not None else lock.id, []).append((lock, verdict))
    out = []
    for group in by_session.values():
        blocking = [
            (lock, verdict)
            for lock, verdict in group
            if lock.facts is not None
            and (lock.facts.waiter_count() > 0 or lock.facts.waits() is not None)
        ]
        named = [pair for pair in group if any(names_lock(pair[0].name, n) for n in names)]
        out.extend(blocking or named or group[:1])
    return out


# --- saying it ------------------------------------------------------------------
