"""`amended`: the fast `dataclasses.replace` the scan uses on every file lock."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from lockwatch.model.lock import Holder, Lock, Reason, amended
from lockwatch.sources.filelocks import FileKey, KernelEvidence
from lockwatch.sources.files.facts import FileFacts, refiled


def a_lock() -> Lock:
    return Lock(
        id="file:/run/x.lock",
        source="file",
        format="generic",
        name="x",
        path="/run/x.lock",
        holder=Holder(pid=42, host="tower"),
        acquired_at=datetime(2026, 1, 2, tzinfo=UTC),
        content={"pid": 42},
        sha256="ab" * 32,
        defects=(Reason("bad", "bad"),),
        facts=FileFacts(file_key=FileKey("8:1", 7)),
    )


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"content": None},
        {"facts": FileFacts(evidence=KernelEvidence()), "holder": Holder(pid=7)},
        {"id": "file:/elsewhere", "acquired_at": None},
    ],
)
def test_amended_is_replace(changes: dict[str, object]) -> None:
    lock = a_lock()
    made = amended(lock, **changes)
    wanted = dataclasses.replace(lock, **changes)  # type: ignore[arg-type]
    assert made == wanted
    # Every field, content too (it is left out of ==).
    for f in dataclasses.fields(Lock):
        assert getattr(made, f.name) is getattr(wanted, f.name), f.name
    assert made is not lock and lock == a_lock()  # the original untouched


def test_amended_refuses_a_field_lock_has_not() -> None:
    with pytest.raises(TypeError, match="no field 'pdi'"):
        amended(a_lock(), pdi=3)


@pytest.mark.parametrize(
    ("facts", "changes"),
    [
        ({}, {}),
        ({"evidence": KernelEvidence(), "users": (1, 2)}, {"holder": Holder(pid=7)}),
        ({"entry": "dir"}, {"id": "file:/elsewhere", "acquired_at": None}),
    ],
)
def test_refiled_is_replace_of_lock_and_facts(
    facts: dict[str, object], changes: dict[str, object]
) -> None:
    lock = a_lock()
    made = refiled(lock, facts, **changes)
    was = lock.facts
    assert isinstance(was, FileFacts)
    wanted = dataclasses.replace(
        lock,
        facts=dataclasses.replace(was, **facts),  # type: ignore[arg-type]
        **changes,  # type: ignore[arg-type]
    )
    assert made == wanted and made.facts == wanted.facts
    assert lock == a_lock()  # the original untouched


def test_refiled_refuses_a_field_file_facts_have_not() -> None:
    with pytest.raises(TypeError, match="no field 'policy'"):
        refiled(a_lock(), {}, policy=3)
    with pytest.raises(TypeError, match="no field 'pdi'"):
        refiled(a_lock(), {"pdi": 3})
