"""`amended`: the fast `dataclasses.replace` the scan uses on every file lock."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from lockwatch.model.kernel import FileKey, KernelEvidence
from lockwatch.model.lock import Holder, Lock, Reason, amended


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
        file_key=FileKey("8:1", 7),
    )


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"content": None},
        {"evidence": KernelEvidence(), "holder": Holder(pid=7), "acquired_at": None},
        {"id": "file:/elsewhere", "entry": "dir", "users": (1, 2)},
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
