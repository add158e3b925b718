"""The blocking tree: roots, waiters, blast radius, and cycles that never loop."""

from __future__ import annotations

from dataclasses import replace

from lockwatch.model.blocking import NodeId, build, from_locks, group
from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.filelocks import KERNEL_GROUP, FileKey, KernelLock
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.kernel.ids import kernel_lock_id


def node_ids(tree_json: dict[str, object]) -> list[object]:
    roots = tree_json["roots"]
    assert isinstance(roots, list)
    return [root["id"] for root in roots]


def test_three_deep_chain() -> None:
    tree = build({2: [1], 3: [2]})
    (root,) = tree.roots
    assert root.id == 1
    assert (root.direct, root.total) == (1, 2)
    (middle,) = root.waiters
    assert (middle.id, middle.direct, middle.total) == (2, 1, 1)
    (leaf,) = middle.waiters
    assert (leaf.id, leaf.waiters, leaf.total) == (3, (), 0)
    assert tree.cycles == ()


def test_two_roots_and_a_shared_waiter() -> None:
    tree = build({10: [1, 2], 11: [1]})
    assert [root.id for root in tree.roots] == [1, 2]
    assert [w.id for w in tree.roots[0].waiters] == [10, 11]
    # 10 is shown once, under the first root; the second root still counts it.
    assert tree.roots[1].waiters == ()
    assert (tree.roots[1].direct, tree.roots[1].total) == (1, 1)
    assert (tree.roots[0].direct, tree.roots[0].total) == (2, 2)


def test_a_queue_of_waiters_does_not_explode() -> None:
    # pg_blocking_pids names the holder and every waiter queued ahead.
    queue: dict[NodeId, list[NodeId]] = {w: [0, *range(1, w)] for w in range(1, 41)}
    tree = build(queue)
    (root,) = tree.roots
    assert root.id == 0 and (root.direct, root.total) == (40, 40)
    seen, stack = 0, [root]
    while stack:
        node = stack.pop()
        seen += 1
        stack.extend(node.waiters)
    assert seen == 41


def test_cycle_is_reported_and_not_followed() -> None:
    tree = build({1: [2], 2: [1], 3: [1]})
    assert tree.cycles == ((1, 2),)
    assert tree.roots == ()  # everyone waits: nobody is a root


def test_cycle_below_a_root() -> None:
    # 5 blocks 1; 1 and 2 wait on each other too.
    tree = build({1: [2, 5], 2: [1]})
    assert tree.cycles == ((1, 2),)
    (root,) = tree.roots
    assert root.id == 5
    (one,) = root.waiters
    (two,) = one.waiters
    assert two.id == 2
    assert [w.id for w in two.waiters] == []  # 1 is already on the path: no loop
    assert root.total == 2


def test_self_wait_is_ignored() -> None:
    assert build({1: [1]}).roots == ()


def test_prepared_transaction_root() -> None:
    tree = build({7: ["prepared:tx1"]})
    assert [root.id for root in tree.roots] == ["prepared:tx1"]
    assert tree.as_json()["roots"][0]["blocks_directly"] == 1  # type: ignore[index]


def test_long_chain_does_not_exhaust_the_stack() -> None:
    chain: dict[NodeId, list[NodeId]] = {i + 1: [i] for i in range(1500)}
    tree = build(chain)
    assert tree.roots[0].id == 0
    assert tree.roots[0].total == 1500
    node = tree.as_json()["roots"][0]  # type: ignore[index]
    depth = 0
    while node["waiters"]:
        node, depth = node["waiters"][0], depth + 1
    assert depth == 1500


def test_big_cycle() -> None:
    ring: dict[NodeId, list[NodeId]] = {i: [(i + 1) % 300] for i in range(300)}
    tree = build(ring)
    assert len(tree.cycles) == 1 and len(tree.cycles[0]) == 300


def _kernel(pid: int, *, waiting: bool = False, blocked_by: tuple[int, ...] = ()) -> Lock:
    kernel = KernelLock(
        1,
        "FLOCK",
        "WRITE",
        FileKey("8:1", 77),
        0,
        None,
        pid,
        waiting,
        (pid,),
        "/locks/a.lock",
        blocked_by=blocked_by,
    )
    return Lock(
        kernel_lock_id(kernel),
        "kernel",
        "flock",
        "a.lock",
        "/locks/a.lock",
        Holder(pid=pid),
        facts=KernelFacts.of(kernel),
    )


def test_kernel_waiters_hang_under_the_processes_they_wait_for() -> None:
    """A chain across two files: 30 holds b and waits for a (held by 20); 40
    waits for b. A lock file of the file source is in no wait-for graph."""
    held_a = _kernel(20)
    holds_b = replace(_kernel(30), id="kernel:b")
    waits_a = _kernel(30, waiting=True, blocked_by=(20,))
    waits_b = _kernel(40, waiting=True, blocked_by=(30,))
    unknown = _kernel(50, waiting=True, blocked_by=(-1,))  # its holder's pid is unknown
    locks = [held_a, holds_b, waits_a, waits_b, unknown]
    assert {group(lock) for lock in locks} == {KERNEL_GROUP}
    assert group(replace(held_a, facts=None)) is None
    tree = from_locks(locks)
    (root,) = tree.roots
    assert (root.id, root.direct, root.total) == (20, 1, 2)
    (middle,) = root.waiters
    assert (middle.id, [w.id for w in middle.waiters]) == (30, [40])
