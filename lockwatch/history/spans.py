"""What the recorder reads off the board's entries, generically: a lock's span
key (state, reason codes, holder), and the wait edges of every wait-for graph
with the waiter and blocker as they were. Only the generic model is asked (the
Lock, its verdict, its facts, the blocking trees' questions): no source is named.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from lockwatch.model import blocking
from lockwatch.model.changes import Entry
from lockwatch.model.events import holder_text
from lockwatch.model.history import Who
from lockwatch.model.lock import Lock
from lockwatch.model.text import scrub_secrets

# Text kept of a query or a name: what the audit log keeps of a lock is bounded too.
MAX_TEXT = 2000

SpanKey = tuple[str, tuple[str, ...], str]
EdgeKey = tuple[str, str, str]  # (server, waiter node, blocker node)


def clean(text: str | None) -> str | None:
    """Scrubbed as the audit log keeps text: secrets in SQL hidden, text UTF-8
    can carry (lone surrogates escaped), bounded."""
    if text is None:
        return None
    scrubbed = scrub_secrets(text)
    try:
        scrubbed.encode("utf-8")
    except UnicodeEncodeError:
        scrubbed = scrubbed.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return scrubbed[:MAX_TEXT]


def span_key(entry: Entry) -> SpanKey:
    """What starts a new span of a lock when it changes: its state, its reason
    codes, its holder (a heartbeat's new time or a session's next query does not)."""
    verdict = entry.verdict
    return (verdict.state.value, verdict.codes, clean(holder_text(entry.lock)) or "")


def place(lock: Lock) -> str:
    if lock.path:
        return clean(lock.path) or ""
    where = lock.facts.where(lock) if lock.facts is not None else None
    return clean(where) or ""


def who(node: Hashable, entry: Entry | None) -> Who:
    """A node of a wait-for graph as its lock row shows it (`entry`), or bare."""
    name = str(node)
    if entry is None:
        return Who(name, pid=node if isinstance(node, int) else None)
    lock = entry.lock
    facts = blocking.tree_facts(lock)
    party = facts.party(lock) if facts is not None else None
    pid = node if isinstance(node, int) else lock.holder.pid
    application = (party.who if party is not None and party.session else None) or None
    # A party that is no session of its own but names its client (a ZooKeeper
    # session's address): said after whatever names it below.
    client = party.who if party is not None and not party.session and party.who else None
    if application is None and lock.facts is not None:
        application = lock.facts.holder_name(lock)
    if application is None and entry.facts is not None and entry.facts.cmdline:
        application = " ".join(entry.facts.cmdline)
    if application is None:
        application = lock.holder.actor or lock.holder.operation
    if client is not None:
        application = f"{application} from {client}" if application else client
    cell = lock.facts.holder_cell(lock) if lock.facts is not None else None
    state = party.state if party is not None and party.state else None
    since = party.state_since if party is not None else None
    return Who(
        name,
        pid=pid,
        application=clean(application),
        user=clean(lock.holder.actor),
        state=clean(state),
        query=clean(cell),
        since=since,
        lock_id=lock.id,
    )


@dataclass(frozen=True, slots=True)
class Edge:
    server: str
    source: str
    waiter: Who
    blocker: Who
    resource: str
    mode: str
    cycle: bool
    # Its waiter is a session of its own with no process (a ZooKeeper contender's
    # session, a LeaseCandidate): its row going, while its blocker holds, is its
    # session going (a pid's waiting row going is a timeout: the process lives on).
    alone: bool = False

    @property
    def key(self) -> EdgeKey:
        return (self.server, self.waiter.node, self.blocker.node)


def _holders(entries: Iterable[Entry]) -> dict[tuple[str, str], Entry]:
    found: dict[tuple[str, str], Entry] = {}
    for entry in entries:
        facts = blocking.tree_facts(entry.lock)
        if facts is None:
            continue
        node, where = facts.holds_as(), facts.group()
        if node is not None and where is not None:
            found.setdefault((where, str(node)), entry)
    return found


def edges(entries: Iterable[Entry]) -> dict[EdgeKey, Edge]:
    """Every wait edge among `entries` (the board's): each waiter and each of
    the nodes it waits on, in its group, with cycles marked."""
    listed = [e for e in entries if blocking.group(e.lock) is not None]
    holders = _holders(listed)
    waiting: dict[str, list[tuple[Entry, Hashable, tuple[Hashable, ...]]]] = {}
    for entry in listed:
        facts = entry.lock.facts
        waits = None if facts is None else facts.waits()
        where = None if facts is None else facts.group()
        if waits is None or where is None:
            continue
        waiting.setdefault(where, []).append((entry, waits[0], waits[1]))
    found: dict[EdgeKey, Edge] = {}
    for where, rows in waiting.items():
        graph: dict[blocking.NodeId, set[blocking.NodeId]] = {}
        for _, waiter, blockers in rows:
            graph.setdefault(waiter, set()).update(blockers)  # type: ignore[arg-type]
        in_cycle = {str(node) for cycle in blocking.build(graph).cycles for node in cycle}
        for entry, waiter, blockers in rows:
            lock = entry.lock
            party = lock.facts.party(lock) if lock.facts is not None else None
            for blocker in blockers:
                held = holders.get((where, str(blocker)))
                edge = Edge(
                    where,
                    lock.source,
                    who(waiter, entry),
                    who(blocker, held),
                    clean(lock.name) or "",
                    clean(party.wants if party is not None else "") or "",
                    str(waiter) in in_cycle and str(blocker) in in_cycle,
                    _alone(entry, waiter),
                )
                found.setdefault(edge.key, edge)
    return found


def _alone(entry: Entry, waiter: Hashable) -> bool:
    facts = entry.lock.facts
    pid = waiter if isinstance(waiter, int) else entry.lock.holder.pid
    return facts is not None and facts.session_key() is None and pid is None


def outcome(
    edge: Edge, now_edges: dict[EdgeKey, Edge], mirror: dict[str, Entry], holding: set[str]
) -> str | None:
    """How the wait on `edge` ended, seen from the board right after: None when
    its waiter still waits (on someone else: a queue moved)."""
    if edge.cycle:
        return "deadlock"
    waiter = edge.waiter.node
    if any(key[0] == edge.server and key[1] == waiter for key in now_edges):
        return None
    lock_id = edge.waiter.lock_id
    still = mirror.get(lock_id) if lock_id is not None else None
    if still is not None and still.lock.facts is not None and still.lock.facts.waits() is None:
        return "acquired"
    if f"{edge.server}\0{edge.blocker.node}" not in holding:
        return "acquired"
    return "gone" if still is None and edge.alone else "timeout"


def holding_nodes(entries: Iterable[Entry]) -> set[str]:
    """Who holds, by the sources' own rows only: a lock file's kernel evidence
    comes from another feed, a poll behind or ahead of the waiter's row."""
    own = (
        entry
        for entry in entries
        if entry.lock.facts is not None and blocking.tree_facts(entry.lock) is entry.lock.facts
    )
    return {f"{where}\0{node}" for where, node in _holders(own)}
