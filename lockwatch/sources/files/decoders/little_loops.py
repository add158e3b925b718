"""little-loops (`ll-loop run`, PyPI `little-loops`): `.loops/.running/`.

What `ll-loop run` leaves in `<project>/.loops/.running/` (fsm/concurrency.py,
cli/loop/run.py, cli/loop/runner.py):

- `<instance>.lock`, the scope lock, `<instance>` being `<loop>-%Y%m%dT%H%M%S`
  (runner._make_instance_id): `json.dump` of `{loop_name, scope[], pid,
  started_at[, singleton]}`, scope paths `Path.resolve()`d. Stale iff the pid is
  dead (`_process_alive`: ESRCH only); no age limit. Live locks whose scopes
  overlap conflict (decided across locks in the model, where a loop started by
  another loop is let through), and so do two live `singleton` runs of one loop
  whatever their scopes (find_conflict's BUG-2526 predicate). The seed's
  relative scope paths are taken from the project root, the directory holding
  `.loops`; an empty scope is the project.
- `.acquire.lock`, an always-empty sentinel `flock(LOCK_EX)`ed around the
  check-then-create of a scope lock and never deleted: held iff the kernel says.
- `<instance>.pid`, the runner's pid (`write_text(str(os.getpid()))`, before the
  scope lock is taken; removed by atexit, so a SIGKILL leaves it behind).
  `_read_pid_file` makes anything but an integer "no pid".

The `.lock` records are JSON, read by content (`claims`/`decode`); the sentinel
and the pid files are not, and `read_runner_file` claims them (loops_queue, a
NATIVE module, hands them over, so that no JSON guess reaches them).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from lockwatch.model.handover import MARK, NewHolder
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.timestamps import format_timestamp
from lockwatch.sources.files.decoders.base import (
    MAX_PID,
    Fields,
    LockFile,
    dump,
    file_lock_for,
)
from lockwatch.sources.files.decoders.hooks import no_refresh
from lockwatch.sources.files.facts import refiled
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "little-loops"
# No pid-reuse allowance (time_by_writer): `started_at` is stamped by the holder
# itself, after it started, once; a process that started later cannot be it.
POLICY = StalenessPolicy(pid_liveness=True)
# `.acquire.lock`: only the flock counts; its mtime is the last acquirer's open.
SENTINEL = StalenessPolicy(kernel_sentinel=True, sentinel_mtime_only=True, kernel_only=True)
# `<instance>.pid`: the runner lives or not. Written by the runner itself (or
# by its launcher right after the spawn), after the runner started: a live pid
# that started later than the file is a recycled one.
PID_FILE = StalenessPolicy(pid_liveness=True)

ACQUIRE_SENTINEL = ".acquire.lock"
# persistence._INSTANCE_SUFFIX: loop names may hold "-", the suffix may not vary.
_INSTANCE_SUFFIX = lazy_compile(r"-\d{8}T\d{6}$")
_MAX_PID_TEXT = 64


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def claims(doc: Mapping[str, Any]) -> bool:
    return "loop_name" in doc or ("scope" in doc and "started_at" in doc)


def hinted(file: LockFile) -> bool:
    # The names as text first (what `parents` matches, so it must be there): a scan
    # asks this of files elsewhere, and a look for text costs less than a split.
    return ".loops/.running/" in file.path and file.parents(2) == (".running", ".loops")


def project_root(file: LockFile) -> str:
    """`<root>/.loops/.running/x.lock` -> `<root>`; elsewhere the lock's own directory."""
    head, _, _ = file.path.rpartition("/")
    if hinted(file):
        head = head.rsplit("/", 2)[0]
    return head or "/"


def in_project(root: str, path: str) -> str:
    """`posixpath.normpath(posixpath.join(root, path))` (`root` absolute): the
    join as it is where it is already normal, the usual scope (`src/x`), which
    normpath, Python code in 3.11, took ~5,000 instructions to tell."""
    if path.startswith("/") or root.endswith("/"):
        return posixpath.normpath(posixpath.join(root, path))
    joined = f"{root}/{path}"
    if not _is_normal(joined):
        return posixpath.normpath(joined)
    return joined


def _is_normal(path: str) -> bool:
    """Whether normpath leaves absolute `path` as it is: no empty, `.` or `..`
    part (`//`, `/./`, `/../`, or at its end), no trailing slash."""
    return (
        path.startswith("/")
        and "//" not in path
        and "/./" not in path
        and "/../" not in path
        and not path.endswith(("/", "/.", "/.."))
    )


def instance_of(stem: str, loop_name: str | None) -> str | None:
    """The run's instance id if the file is named after one of `loop_name`'s runs."""
    if loop_name is None or not _INSTANCE_SUFFIX.search(stem):
        return None
    return stem if _INSTANCE_SUFFIX.sub("", stem) == loop_name else None


def decode(doc: Mapping[str, Any], file: LockFile) -> Lock:
    fields = Fields(doc)
    loop_name = fields.text("loop_name")
    scope = fields.string_list("scope")
    pid = fields.pid()
    started_at = fields.timestamp("started_at")
    root = project_root(file)
    normalized = (
        tuple(in_project(root, path) for path in scope or ["."]) if scope is not None else ()
    )
    instance = instance_of(file.stem(), loop_name)
    # ScopeLock.from_dict: bool(data.get("singleton", False)).
    singleton = loop_name if doc.get("singleton") else None
    lock = _file_lock(
        file,
        # Runs of one loop differ by instance only: the row names the run.
        name=instance or loop_name or file.stem(),
        content=doc,
        holder=Holder(
            pid=pid, session=instance, operation=f"loop {loop_name}" if loop_name else None
        ),
        acquired_at=started_at,
        scope=normalized,
        defects=fields.defects,
    )
    return refiled(lock, {"singleton_name": singleton}) if singleton else lock


def read_runner_file(file: LockFile) -> Lock | None:
    """`.running/.acquire.lock` and `.running/<instance>.pid`; None for the rest."""
    if file.kind != "file" or not hinted(file):
        return None
    if file.name == ACQUIRE_SENTINEL:
        return _file_lock(
            file,
            name=ACQUIRE_SENTINEL,
            policy=SENTINEL,
            # LockManager opens it "w": any bytes in it are nobody's record.
            content=file.raw[:_MAX_PID_TEXT].decode("utf-8", "replace"),
            acquired_at=file.modified_at,
            notes=(
                Reason(
                    "no_pid",
                    "ll-loop's sentinel: flock'ed only while a run checks scopes and"
                    " writes its lock; the file itself stays for good",
                ),
            ),
        )
    if file.name.endswith(".pid"):
        return _pid_file(file)
    return None


def _pid_file(file: LockFile) -> Lock:
    stem = file.stem()
    loop_name = _INSTANCE_SUFFIX.sub("", stem)
    text = file.raw[:_MAX_PID_TEXT].decode("utf-8", "replace")
    # _read_pid_file: int(read_text().strip()); int() also takes "+5" and "1_0",
    # which no writer of these files produces: only plain digits are a pid here.
    digits = text.strip()
    pid = int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 10 else None
    defects: tuple[Reason, ...] = ()
    if pid is None or not 0 < pid <= MAX_PID or len(file.raw) > _MAX_PID_TEXT:
        pid = None
        defects = (
            Reason(
                "unparseable",
                "not a pid (little-loops writes the runner's pid alone and reads"
                " anything else as no pid)",
            ),
        )
    return _file_lock(
        file,
        name=stem,
        policy=PID_FILE,
        content=text,
        holder=Holder(
            pid=pid,
            session=stem if stem != loop_name else None,
            operation=f"runner of loop {loop_name}",
        ),
        acquired_at=file.modified_at,  # written once, right after the runner started
        defects=defects,
    )


def handover(doc: Any, new: NewHolder) -> bytes | None:
    """The loop's scope held by the operator's process: same name, same scope."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("scope"), list):
        return None
    return dump(
        {
            "loop_name": doc.get("loop_name"),
            "scope": doc["scope"],
            "pid": new.pid,
            "started_at": format_timestamp(new.at),
            MARK: new.mark(previous=doc.get("pid")),
        }
    )


refresh = no_refresh  # its liveness is the pid alone
