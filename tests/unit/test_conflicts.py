"""Scope conflicts: which paths overlap, and which live locks get `scope_conflict`."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.assess import assess
from lockwatch.model.conflicts import overlapping_pairs, with_scope_conflicts
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.files.decoders import decode_file, little_loops
from lockwatch.sources.files.facts import FileFacts
from tests.conftest import LOCAL_HOST, NOW, ago, alive, iso, lock_file

# --- overlapping_pairs -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("/p/src", "/p/src"),
        ("/p", "/p/src"),
        ("/p/src", "/p"),
        ("/p", "/p/src/deep/er/file.py"),
        ("/", "/p/src"),
        ("/p/src/", "/p/src"),
        ("/p/src//", "/p/src/lib"),
        ("/p/src/../src", "/p/src"),
        ("/p/docs/../src/lib", "/p/src"),
        ("/p/./src", "/p/src/x"),
        ("//p/src", "/p/src"),
    ],
)
def test_overlapping_paths(a: str, b: str) -> None:
    assert overlapping_pairs([[a], [b]]) == {(0, 1)}


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("/p/src", "/p/tests"),
        ("/p/a/b", "/p/a/bc"),
        ("/p/a/bc", "/p/a/b"),
        ("/a/b", "/a/bc"),
        ("/p/a/b", "/p/a/b-c"),
        ("/p/a/b", "/p/a/b.txt"),
        ("/p/src/lib", "/p/src/tests"),
        ("/p/src/../docs", "/p/src"),
        ("/p1", "/p"),
    ],
)
def test_non_overlapping_paths(a: str, b: str) -> None:
    assert overlapping_pairs([[a], [b]]) == set()


def test_duplicate_paths_within_one_scope_are_not_a_self_conflict() -> None:
    assert overlapping_pairs([["/p/src", "/p/src", "/p/src/lib", "/p"]]) == set()
    assert overlapping_pairs([["/p/src", "/p/src/"], ["/p/tests"]]) == set()


def test_one_overlapping_path_out_of_many_is_enough() -> None:
    scopes = [["/p/a", "/p/b", "/p/c"], ["/q/x", "/q/y", "/p/c/d"], ["/r"]]
    assert overlapping_pairs(scopes) == {(0, 1)}


def test_pairs_are_ordered_and_unique() -> None:
    scopes = [["/p/a/x", "/p/a/y"], ["/p/a"], ["/p"], ["/q"]]
    assert overlapping_pairs(scopes) == {(0, 1), (0, 2), (1, 2)}


def test_empty_scopes_overlap_nothing() -> None:
    assert overlapping_pairs([[], ["/p"], []]) == set()
    assert overlapping_pairs([]) == set()


def test_root_overlaps_everything() -> None:
    assert overlapping_pairs([["/a/b"], ["/"], ["/c"]]) == {(0, 1), (1, 2)}


# --- brute-force reference -----------------------------------------------------------


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.split("/") if p)


def _reference_pairs(canonical: Sequence[Sequence[tuple[str, ...]]]) -> set[tuple[int, int]]:
    """O(n^2): i and j overlap iff a path of one is a path or an ancestor of the other's."""
    own = [set(paths) for paths in canonical]
    ancestors = [{p[:k] for p in paths for k in range(len(p) + 1)} for paths in canonical]
    pairs = set()
    for i in range(len(canonical)):
        for j in range(i + 1, len(canonical)):
            if not own[i].isdisjoint(ancestors[j]) or not own[j].isdisjoint(ancestors[i]):
                pairs.add((i, j))
    return pairs


NAMES = ("a", "b", "ab", "a b", "a-b", "ba", "c")


def _noisy(parts: tuple[str, ...], rng: random.Random) -> str:
    """Spell `/w/<parts>` in one of the ways that mean the same directory."""
    pieces = ["", "w"]
    for part in parts:
        if rng.random() < 0.1:
            pieces.extend([rng.choice(NAMES), ".."])
        if rng.random() < 0.1:
            pieces.append(".")
        pieces.append(part)
    text = "/".join(pieces)
    if rng.random() < 0.2:
        text += "/"
    if rng.random() < 0.1:
        text = text.replace("/", "//", 1)
    return text


def _random_scopes(n: int, seed: int) -> tuple[list[list[str]], list[list[tuple[str, ...]]]]:
    rng = random.Random(seed)
    written: list[list[str]] = []
    canonical: list[list[tuple[str, ...]]] = []
    for _ in range(n):
        scope_w: list[str] = []
        scope_c: list[tuple[str, ...]] = []
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            parts = tuple(rng.choice(NAMES) for _ in range(rng.randint(1, 5)))
            scope_w.append(_noisy(parts, rng))
            scope_c.append(("w", *parts))
        written.append(scope_w)
        canonical.append(scope_c)
    return written, canonical


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_overlapping_pairs_matches_brute_force_on_small_sets(seed: int) -> None:
    written, canonical = _random_scopes(200, seed)
    assert overlapping_pairs(written) == _reference_pairs(canonical)


def test_overlapping_pairs_matches_brute_force_on_2000_scopes() -> None:
    written, canonical = _random_scopes(2000, seed=2026)
    expected = _reference_pairs(canonical)
    assert len(expected) > 1000  # a meaningful number of overlaps...
    assert len(expected) < 2000 * 1999 // 4  # ...but far from everything overlapping
    assert overlapping_pairs(written) == expected


# --- with_scope_conflicts ------------------------------------------------------------


def make_lock(name: str, scope: Sequence[str], fmt: str = little_loops.FORMAT) -> Lock:
    return Lock(
        id=f"file:/p/.loops/.running/{name}.lock",
        source="file",
        format=fmt,
        name=name,
        path=f"/p/.loops/.running/{name}.lock",
        holder=Holder(pid=100),
        acquired_at=ago(60),
        scope=tuple(scope),
        facts=FileFacts(little_loops.POLICY),
    )


def verdict(state: State = State.ACTIVE) -> Verdict:
    return Verdict(state, (Reason("base", "kept"),))


def conflicts(locks: Sequence[Lock], states: Sequence[State]) -> list[Verdict]:
    return with_scope_conflicts(locks, [verdict(s) for s in states])


def test_both_live_locks_get_scope_conflict_naming_each_other() -> None:
    a, b = make_lock("fix-bugs", ["/p/src"]), make_lock("refactor", ["/p/src/lib"])
    va, vb = conflicts([a, b], [State.ACTIVE, State.ACTIVE])
    assert va.codes == ("base", "scope_conflict")
    assert vb.codes == ("base", "scope_conflict")
    assert "refactor" in va.reasons[-1].message
    assert "fix-bugs" in vb.reasons[-1].message
    assert va.conflicts_with == (b.id,)
    assert vb.conflicts_with == (a.id,)
    assert va.state is vb.state is State.ACTIVE


def test_non_overlapping_live_locks_are_untouched() -> None:
    locks = [make_lock("a", ["/p/src"]), make_lock("b", ["/p/tests"])]
    before = [verdict(), verdict()]
    assert with_scope_conflicts(locks, before) == before


@pytest.mark.parametrize("other", [State.STALE, State.INVALID, State.WAITING])
def test_only_live_locks_conflict(other: State) -> None:
    locks = [make_lock("live", ["/p/src"]), make_lock("gone", ["/p/src"])]
    live, gone = conflicts(locks, [State.ACTIVE, other])
    assert "scope_conflict" not in live.codes and live.conflicts_with == ()
    assert "scope_conflict" not in gone.codes and gone.conflicts_with == ()


def test_stale_lock_between_two_live_ones_only_links_the_live_ones() -> None:
    locks = [
        make_lock("one", ["/p/src"]),
        make_lock("dead", ["/p"]),
        make_lock("two", ["/p/src/x"]),
    ]
    one, dead, two = conflicts(locks, [State.ACTIVE, State.STALE, State.ACTIVE])
    assert one.conflicts_with == (locks[2].id,)
    assert two.conflicts_with == (locks[0].id,)
    assert dead.conflicts_with == () and "scope_conflict" not in dead.codes


def test_different_formats_do_not_conflict() -> None:
    locks = [make_lock("a", ["/p/src"]), make_lock("b", ["/p/src"], fmt="other-format")]
    a, b = conflicts(locks, [State.ACTIVE, State.ACTIVE])
    assert a.conflicts_with == () and b.conflicts_with == ()


def test_locks_without_scope_never_conflict() -> None:
    locks = [make_lock("a", []), make_lock("b", []), make_lock("c", ["/p"])]
    results = conflicts(locks, [State.ACTIVE] * 3)
    assert all(v.conflicts_with == () for v in results)


def test_three_way_conflict_lists_everybody() -> None:
    locks = [make_lock("c", ["/p"]), make_lock("a", ["/p/x"]), make_lock("b", ["/p/y"])]
    c, a, b = conflicts(locks, [State.ACTIVE] * 3)
    # a and b are siblings: each conflicts only with c; c conflicts with both, by name.
    assert c.conflicts_with == (locks[1].id, locks[2].id)
    assert a.conflicts_with == (locks[0].id,)
    assert b.conflicts_with == (locks[0].id,)
    message = c.reasons[-1].message
    assert "a" in message and "b" in message


def test_many_partners_are_summarised_in_the_message() -> None:
    locks = [make_lock("root", ["/p"])] + [
        make_lock(f"loop-{i:02d}", [f"/p/{i}"]) for i in range(8)
    ]
    root = conflicts(locks, [State.ACTIVE] * len(locks))[0]
    assert len(root.conflicts_with) == 8
    assert "loop-00" in root.reasons[-1].message
    assert "and 3 more" in root.reasons[-1].message


def test_with_scope_conflicts_matches_brute_force_on_2000_locks() -> None:
    rng = random.Random(7)
    written, canonical = _random_scopes(2000, seed=7)
    formats = [rng.choice((little_loops.FORMAT, little_loops.FORMAT, "other")) for _ in written]
    states = [rng.choice((State.ACTIVE, State.ACTIVE, State.STALE, State.INVALID)) for _ in written]
    locks = [
        make_lock(f"loop-{i:04d}", scope, fmt=fmt)
        for i, (scope, fmt) in enumerate(zip(written, formats, strict=True))
    ]

    results = conflicts(locks, states)

    # Reference: compare every pair of live, same-format locks.
    live = [i for i, s in enumerate(states) if s is State.ACTIVE]
    expected: dict[int, set[str]] = {i: set() for i in range(len(locks))}
    for fmt in set(formats):
        members = [i for i in live if formats[i] == fmt]
        for a, b in _reference_pairs([canonical[i] for i in members]):
            expected[members[a]].add(locks[members[b]].id)
            expected[members[b]].add(locks[members[a]].id)

    assert sum(1 for ids in expected.values() if ids) > 100
    for i, result in enumerate(results):
        assert set(result.conflicts_with) == expected[i], locks[i].name
        assert len(result.conflicts_with) == len(expected[i])
        assert ("scope_conflict" in result.codes) == bool(expected[i])
        assert result.state is states[i]
        assert result.reasons[0] == Reason("base", "kept")


# --- end to end: decoded little-loops locks through assess ----------------------------


def _loop(root: str, name: str, scope: list[str], pid: int) -> Lock:
    content = {"loop_name": name, "scope": scope, "pid": pid, "started_at": iso(ago(120))}
    return decode_file(lock_file(f"{root}/.loops/.running/{name}.lock", json.dumps(content)))


def test_assess_marks_overlapping_live_little_loops() -> None:
    root = "/home/dev/proj"
    locks = [
        _loop(root, "fix-bugs", ["src/"], 100),
        _loop(root, "lint", ["src/lockwatch/model"], 101),
        _loop(root, "docs", ["docs"], 100),
        _loop(root, "crashed", [], 999),  # whole project, but its pid is dead
    ]
    table = StaticProcesses(alive(100), alive(101))
    assessed = dict(
        (lock.name, v) for lock, v in assess(locks, table, FrozenClock(NOW), LOCAL_HOST)
    )

    assert assessed["fix-bugs"].codes == ("scope_conflict",)
    assert assessed["fix-bugs"].conflicts_with == (locks[1].id,)
    assert assessed["lint"].codes == ("scope_conflict",)
    assert assessed["lint"].conflicts_with == (locks[0].id,)
    assert assessed["docs"].codes == () and assessed["docs"].state is State.ACTIVE
    assert assessed["crashed"].codes == ("holder_dead",)
    assert assessed["crashed"].conflicts_with == ()


def test_assess_whole_project_scope_conflicts_with_every_live_loop() -> None:
    root = "/home/dev/proj"
    locks = [
        _loop(root, "all", [], 100),
        _loop(root, "a", ["src"], 100),
        _loop(root, "b", ["docs"], 100),
    ]
    verdicts = [
        v for _, v in assess(locks, StaticProcesses(alive(100)), FrozenClock(NOW), LOCAL_HOST)
    ]
    assert verdicts[0].conflicts_with == (locks[1].id, locks[2].id)
    assert verdicts[1].conflicts_with == (locks[0].id,)
    assert verdicts[2].conflicts_with == (locks[0].id,)
