"""The watcher's fallback message names the real cause, not the task group that
wrapped it ("unhandled errors in a TaskGroup (1 sub-exception)")."""

from __future__ import annotations

import errno

from lockwatch.model.status import failure_cause
from lockwatch.sources.files.polling import polling_reason


def test_a_group_of_one_names_its_exception() -> None:
    group = ExceptionGroup(
        "unhandled errors in a TaskGroup", [OSError(errno.ENOSPC, "OS file watch limit reached")]
    )
    cause = failure_cause(group)
    assert "TaskGroup" not in cause
    assert cause == "OSError: [Errno 28] OS file watch limit reached"


def test_nested_groups_are_unwrapped_and_repeats_said_once() -> None:
    inner = ExceptionGroup("inner", [UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad byte")])
    group = ExceptionGroup("outer", [inner, RuntimeError("boom"), RuntimeError("boom")])
    cause = failure_cause(group)
    assert cause.startswith("UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff")
    assert cause.endswith("; RuntimeError: boom") and cause.count("boom") == 1


def test_a_plain_exception_and_an_empty_message() -> None:
    assert failure_cause(PermissionError(errno.EACCES, "denied")) == (
        "PermissionError: [Errno 13] denied"
    )
    assert failure_cause(KeyError()) == "KeyError"


def test_the_polling_reason_names_an_unexpected_cause() -> None:
    """Errors the header has no words of its own for are named by type and message."""
    assert polling_reason(OSError(errno.ENOSPC, "No space left on device")) == (
        "out of inotify watches"
    )
    reason = polling_reason(OSError(errno.EACCES, "Permission denied"))
    assert reason == "cannot watch: PermissionError: [Errno 13] Permission denied"
