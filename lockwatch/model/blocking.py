"""Who waits on whom: the blocking tree of one server (or of this host's kernel
locks), with cycles called out.

Roots are blockers that wait on nobody; each node's children are the sessions
waiting on it. A wait-for cycle (a deadlock in the making, before the server's
deadlock_timeout resolves it) has no root: it is reported on its own, and walks
never loop on it.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from typing import cast

from lockwatch.model.facts import Facts
from lockwatch.model.lock import Lock
from lockwatch.model.slots import lean_dataclass

# A session is a pid; a prepared transaction, which has none, is "prepared:<gid>".
NodeId = int | str


@lean_dataclass(frozen=True, slots=True)
class BlockNode:
    id: NodeId
    waiters: tuple[BlockNode, ...]
    direct: int  # sessions waiting on this one directly
    total: int  # sessions held up by this one, directly or down the chain

    def as_json(self) -> dict[str, object]:
        # Iterative too: a chain thousands deep must not exhaust the stack.
        rendered: dict[int, dict[str, object]] = {}
        stack: list[tuple[BlockNode, bool]] = [(self, False)]
        while stack:
            node, ready = stack.pop()
            if not ready:
                stack.append((node, True))
                stack.extend((waiter, False) for waiter in node.waiters)
                continue
            rendered[id(node)] = {
                "id": node.id,
                "blocks_directly": node.direct,
                "blocks_in_total": node.total,
                "waiters": [rendered[id(waiter)] for waiter in node.waiters],
            }
        return rendered[id(self)]


@lean_dataclass(frozen=True, slots=True)
class BlockingTree:
    roots: tuple[BlockNode, ...]
    cycles: tuple[tuple[NodeId, ...], ...]

    def as_json(self) -> dict[str, object]:
        return {
            "roots": [root.as_json() for root in self.roots],
            "cycles": [list(cycle) for cycle in self.cycles],
        }


def build(waits_on: Mapping[NodeId, Iterable[NodeId]]) -> BlockingTree:
    """`waits_on[w]` lists who session w waits on (pg_blocking_pids).

    Each session appears once in the tree, under the first blocker that reaches it
    breadth-first: pg_blocking_pids also names the waiters queued ahead, so a queue
    of N waiters has 2^N paths, and a tree of paths would explode. A node's counts
    still tell its whole blast radius.
    """
    blockers: dict[NodeId, set[NodeId]] = {w: set(b) - {w} for w, b in waits_on.items()}
    waiters: dict[NodeId, set[NodeId]] = defaultdict(set)
    for waiter, blocked_by in blockers.items():
        for blocker in blocked_by:
            waiters[blocker].add(waiter)

    def held_up(node: NodeId) -> int:
        seen: set[NodeId] = set()
        stack = [node]
        while stack:
            for waiter in waiters.get(stack.pop(), ()):
                if waiter not in seen and waiter != node:
                    seen.add(waiter)
                    stack.append(waiter)
        return len(seen)

    roots = sorted((n for n in waiters if not blockers.get(n)), key=_order)
    placed: set[NodeId] = set(roots)
    children: dict[NodeId, list[NodeId]] = {}
    order: list[NodeId] = []
    queue = deque(roots)
    while queue:
        node = queue.popleft()
        order.append(node)
        kids = [w for w in sorted(waiters.get(node, ()), key=_order) if w not in placed]
        placed.update(kids)
        children[node] = kids
        queue.extend(kids)
    built: dict[NodeId, BlockNode] = {}
    for node in reversed(order):  # children before parents: no recursion
        built[node] = BlockNode(
            node,
            tuple(built[kid] for kid in children[node]),
            len(waiters.get(node, ())),
            held_up(node),
        )
    return BlockingTree(tuple(built[root] for root in roots), _cycles(blockers))


def tree_facts(lock: Lock) -> Facts | None:
    """What the blocking trees ask of `lock`: its source's facts, or what stands
    for them there (a lock file's held kernel lock); None: it is in no wait-for
    graph."""
    facts = lock.facts
    return None if facts is None else facts.in_trees(lock)


def group(lock: Lock) -> str | None:
    """Whose wait-for graph `lock` belongs to: its Postgres server's, the
    kernel's (KERNEL_GROUP: its own lock, or a lock file's held kernel lock), a
    store's, or none (a lock file nobody holds a kernel lock on: nobody waits on
    one in a queue anybody sees)."""
    facts = tree_facts(lock)
    return None if facts is None else facts.group()


def trees(locks: Iterable[Lock]) -> dict[str, BlockingTree]:
    """Each wait-for graph's tree, for the graphs a source of their own lists
    (a Postgres server's, the kernel's with --kernel): lock files alone held by
    kernel locks make no tree (nobody listing the kernel's waits, "nobody waits"
    would be a guess)."""
    by_group: dict[str, list[Lock]] = {}
    listed: set[str] = set()
    for lock in locks:
        where = group(lock)
        if where is not None:
            by_group.setdefault(where, []).append(lock)
            if lock.facts is not None and tree_facts(lock) is lock.facts:
                listed.add(where)
    return {where: from_locks(members) for where, members in by_group.items() if where in listed}


@lean_dataclass(frozen=True, slots=True)
class Radius:
    """A blocker's blast radius: sessions it holds up directly and in total."""

    direct: int
    total: int
    root: bool  # it waits on nobody: ending it frees the whole chain


def node_of(lock: Lock) -> NodeId | None:
    """The session (node) holding `lock`, as the trees name it; None if it is not
    a held lock of a session."""
    facts = tree_facts(lock)
    return None if facts is None else cast("NodeId | None", facts.holds_as())


def radii(tree: BlockingTree) -> dict[NodeId, Radius]:
    """Every blocker of `tree` with its blast radius."""
    found: dict[NodeId, Radius] = {}
    stack = [(root, True) for root in tree.roots]
    while stack:
        node, is_root = stack.pop()
        if node.total and node.id not in found:
            found[node.id] = Radius(node.direct, node.total, is_root)
        stack.extend((waiter, False) for waiter in node.waiters)
    return found


def from_locks(locks: Iterable[Lock]) -> BlockingTree:
    """The tree of one group's records: every waiting session and whom it waits
    on (a prepared transaction by its name, never as pid 0), or every process
    blocked on a kernel lock and the processes holding it."""
    waits_on: dict[NodeId, set[NodeId]] = defaultdict(set)
    for lock in locks:
        facts = lock.facts
        waits = None if facts is None else facts.waits()
        if waits is not None:
            # The facts name nodes as the trees do: pids, names (a prepared
            # transaction, a store's session).
            waiter, blockers = cast("tuple[NodeId, tuple[NodeId, ...]]", waits)
            waits_on[waiter].update(blockers)
    return build(waits_on)


def _order(node: NodeId) -> tuple[int, str]:
    return (0, f"{node:012d}") if isinstance(node, int) else (1, node)


def _cycles(edges: Mapping[NodeId, set[NodeId]]) -> tuple[tuple[NodeId, ...], ...]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[NodeId, int] = {}
    low: dict[NodeId, int] = {}
    on_stack: set[NodeId] = set()
    stack: list[NodeId] = []
    found: list[tuple[NodeId, ...]] = []
    counter = 0
    for start in sorted(edges, key=_order):
        if start in index:
            continue
        work: list[tuple[NodeId, list[NodeId]]] = [
            (start, sorted(edges.get(start, ()), key=_order))
        ]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()), key=_order)))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[NodeId] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component, key=_order)))
    return tuple(sorted(found, key=lambda c: _order(c[0])))
