"""The file source's facts: what a lock file is beyond what every lock has.

A lock file's facts (`Lock.facts`) carry its format's rules (`StalenessPolicy`,
judged by `sources/files/rules.py`), its identity on disk and what the kernel
and the processes at work say about it. Generic code asks them the questions
of `model/facts.py`, as it asks a server's; only the file source reads these
fields.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from dataclasses import fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from lockwatch.model.facts import Facts, Party
from lockwatch.model.lock import Lock, Reason, amended, with_facts
from lockwatch.model.slots import fast_init, lean_dataclass
from lockwatch.sources.filelocks import (
    KERNEL_GROUP,
    FileKey,
    KernelEvidence,
    KernelLock,
    holders_json,
    holders_label,
    uncertainty_json,
)
from lockwatch.sources.files.policy import NO_POLICY, StalenessPolicy
from lockwatch.sources.files.rules import evaluate_file

if TYPE_CHECKING:
    from lockwatch.model.clues import Clue, Match
    from lockwatch.model.process import ProcessLookup
    from lockwatch.model.verdict import Verdict


@fast_init
@lean_dataclass(frozen=True, slots=True)
class FileFacts(Facts):
    """What the file source knows about one lock file."""

    # Its format's staleness rules, declared by its decoder as data.
    policy: StalenessPolicy = NO_POLICY
    # Its device and inode, as it was read: how kernel locks find it.
    file_key: FileKey | None = None
    # What the lock file is: a regular "file", a "symlink" lock (read, never
    # followed) or a lock "dir" (the mkdir idiom). A break moves that very entry.
    entry: str = "file"
    # What the kernel says about it; None where nobody could ask.
    evidence: KernelEvidence | None = None
    # The file whose kernel locks decide this lock, when it is not the lock file
    # itself (Terraform's .lock.info: the kernel lock is on the state file).
    kernel_file: str | None = None
    # Processes working on what the lock guards, as the file source found them
    # (git processes in the repository of a `.git/*.lock`); None: nobody looked.
    users: tuple[int, ...] | None = None
    # Live locks of one format with the same singleton name exclude each other
    # whatever their scopes (little-loops' `singleton: true` loops, by loop_name).
    singleton_name: str | None = None
    # Why this sighting is only the last one: the lock could not be read again (its
    # directory made unreadable), so nobody here can tell whether it is still held.
    # A fact of the lock, not of one verdict: judged again, it stays unknown.
    unseen: Reason | None = None
    # Why its content was never read (lockwatch's user may not read it: a root-only
    # dpkg lock, to anyone else): listed from its place alone. A kernel lock held on
    # it still says who holds it; with none, nobody here can tell.
    unread: Reason | None = None
    # The file's mtime where it is not the lock's age (a sentinel's, which the
    # kernel's word dropped from `acquired_at`) but a reading names it: an
    # existence lock's age, if that is what the file is.
    modified_at: datetime | None = None

    rewritable: ClassVar[bool] = True

    # --- the verdict ----------------------------------------------------------

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        return evaluate_file(lock, self, processes, now, local_host)

    # --- the JSON contract ----------------------------------------------------

    def record(
        self, lock: Lock, verdict: Verdict, now: datetime | None, memo: dict[Any, Any]
    ) -> dict[str, Any] | None:
        record = (_GENERIC_RECORD or _generic_record())(lock, verdict)
        evidence = self.evidence
        if evidence is not None and evidence.holds:
            # A lock file's kernel lock, as the kernel source would list it: the
            # file's row is that lock's (one row per file), its facts joined here.
            hold = evidence.holds[0]
            record["kernel"] = hold.as_json()
            record.update(uncertainty_json(hold))
            if hold.holders:
                record["holders"] = holders_json(hold)
            if hold.blocking:
                record["blocking"] = list(hold.blocking)
        return record

    # --- how it reads ---------------------------------------------------------

    def holders_label(self) -> str | None:
        evidence = self.evidence
        if evidence is None or not evidence.holds:
            return None
        return holders_label(evidence.holds[0])

    def content_title(self) -> str | None:
        return "Content"

    def waits_said(self) -> str | None:
        evidence = self.evidence
        if evidence is not None and evidence.waiters:
            return f"{evidence.waiters} waiting on it (kernel)"
        return None

    def refresh_every(self, lock: Lock) -> float | None:
        # At half the time after which its format calls a heartbeat late, so a
        # held lock never looks late, even with a tick's delay and a slow write.
        policy = self.policy
        if policy.heartbeat and lock.ttl_seconds:
            return lock.ttl_seconds * policy.heartbeat_late_fraction / 2
        if policy.max_age:
            return policy.max_age / 3
        return None

    def singleton(self) -> str | None:
        return self.singleton_name

    # --- filters and `why` ----------------------------------------------------

    def named_by(self, lock: Lock, clue: Clue) -> Match | None:
        # A lock file is found by its path, which `why` looks up itself.
        return None

    # --- blocking trees -------------------------------------------------------

    def in_trees(self, lock: Lock) -> Facts | None:
        evidence = self.evidence
        if evidence is None or not evidence.holds:
            return None
        return HeldFile(evidence.holds[0], evidence.waiters)


@lean_dataclass(frozen=True, slots=True)
class HeldFile(Facts):
    """What the wait-for graphs ask of a lock file a kernel lock is held on: the
    file's row is that lock's row (one row per file), so it is the node that
    processes blocked on the file wait on, named as the kernel's own row of the
    lock would name it. Nothing else of the file's row changes: its verdict,
    record and views are the file's."""

    line: KernelLock  # the granted lock on the file its holder is named by
    waiters: int  # processes blocked on the file's locks

    def group(self) -> str | None:
        return KERNEL_GROUP

    def holds_as(self) -> Hashable | None:
        return self.line.holder_pid

    def waiter_count(self) -> int:
        return self.waiters

    def party(self, lock: Lock) -> Party | None:
        pid = self.line.holder_pid
        if pid is None:
            return None
        name = lock.path.rpartition("/")[2] if lock.path else lock.name
        return Party(pid, True, f"{self.line.mode} {self.line.format} on {name}")


NO_FACTS = FileFacts()

# model.report's generic_record, imported on a first record: `why` loads these
# facts and never renders a record, and an import in `record` itself costs each
# lock of a scan a look-up in sys.modules.
_GENERIC_RECORD: Callable[[Lock, Verdict], dict[str, Any]] | None = None


def _generic_record() -> Callable[[Lock, Verdict], dict[str, Any]]:
    global _GENERIC_RECORD
    from lockwatch.model.report import generic_record

    _GENERIC_RECORD = generic_record
    return generic_record


_NAMES = tuple(f.name for f in fields(FileFacts))
_INDEX = {name: index for index, name in enumerate(_NAMES)}
_VALUES = operator.attrgetter(*_NAMES)


def facts_of(lock: Lock) -> FileFacts:
    """A lock file's facts (every lock the file source makes has them)."""
    facts = lock.facts
    return facts if isinstance(facts, FileFacts) else NO_FACTS


def refiled(lock: Lock, facts: dict[str, Any], **changes: Any) -> Lock:
    """`lock` with its file facts' fields `facts` changed, and its own `changes`:
    as cheap as `amended`, which every lock file of a scan goes through."""
    values = list(_VALUES(facts_of(lock)))
    for name, value in facts.items():
        index = _INDEX.get(name)
        if index is None:
            raise TypeError(f"FileFacts has no field {name!r}")
        values[index] = value
    if changes:
        return amended(lock, facts=FileFacts(*values), **changes)
    return with_facts(lock, FileFacts(*values))
