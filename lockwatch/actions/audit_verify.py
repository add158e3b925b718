"""`lockwatch audit verify`: is the audit log as lockwatch wrote it?

What it can tell, and against whom (the README says the same):
- every record's hash, the chain and the sequence: an edit, a removal or a
  reordering by someone who does not recompute hashes;
- every keyed record's MAC: an edit by someone who can write the log but cannot
  read the key, even if they recompute every hash after it;
- the head: records removed from the end (back to a point no saved copy of the
  head matches);
- anchors (`--anchors`, what `--audit-syslog` sent): a log rewritten whole,
  even by someone holding the key, as far as the anchors reach.

A line that a crash cut short is not an edit: lockwatch's next record marks it
with its size and hash, and a cut-short last line that the head never
confirmed is what an interrupted append leaves. Both are reported as torn.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lockwatch.actions.audit_format import (
    GENESIS,
    KEY_ID,
    MAC,
    TORN,
    head_mac_body,
    head_path,
    mac_body,
    read_head,
    read_records,
    record_hash,
    serialized,
    torn_marker,
)
from lockwatch.actions.audit_key import (
    AuditKey,
    AuditKeyError,
    default_key_path,
    keyed_since,
    registry_path,
)
from lockwatch.model.lazyre import lazy_compile

INTACT = "intact"
TORN_TAIL = "torn"
TAMPERED = "tampered"
NEEDS_KEY = "needs_key"

_ANCHOR = lazy_compile(r"seq=(\d+) hash=(sha256:[0-9a-f]{64})(?: event=\S*)?(?: log=(.*))?$")


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    records: int
    # The first bad record's line number and what is wrong with it.
    line: int | None = None
    seq: int | None = None
    problem: str | None = None
    # intact, torn (a crash cut the last line short: not an edit), tampered, or
    # needs_key (keyed records, and not the key to check them with).
    status: str = INTACT
    keyed: int = 0
    unkeyed: int = 0
    key_id: str | None = None
    # What is worth knowing about a log that verifies: torn lines, a head behind.
    notes: tuple[str, ...] = ()
    anchored: int = 0


def verify(
    path: Path,
    *,
    key: AuditKey | None = None,
    key_file: Path | None = None,
    anchors: Iterable[str] | None = None,
) -> Verification:
    """Check every record's hash, MAC, the chain, the sequence, and the head (and
    the anchors given: lines as `--audit-syslog` sent them). The key is `key`,
    else the one at `key_file`, else the default one, if there is one. A shared
    lock on the log waits out any append in progress (its record written, its
    head not yet), which would otherwise look like tampering."""
    key_problem = None
    if key is None:
        try:
            key = AuditKey.load(key_file or default_key_path())
        except AuditKeyError as exc:
            key_problem = str(exc)
    with open(path, "rb") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        return _Check(path, key, key_problem).run(anchors or ())


@dataclass
class _Check:
    path: Path
    key: AuditKey | None
    key_problem: str | None
    count: int = 0
    keyed: int = 0
    unkeyed: int = 0
    notes: list[str] = field(default_factory=list)
    hashes: dict[int, str] = field(default_factory=dict)

    def tampered(self, line: int | None, seq: int | None, problem: str) -> Verification:
        return Verification(
            False, self.count, line, seq, problem, TAMPERED, self.keyed, self.unkeyed
        )

    def needs_key(self, seq: int | None, what: str) -> Verification:
        where = self.key_problem or (
            f"the key at {self.key.path} is key {self.key.id}" if self.key else ""
        )
        problem = f"{what}: verify needs that key (--audit-key){'; ' + where if where else ''}"
        return Verification(
            False, self.count, None, seq, problem, NEEDS_KEY, self.keyed, self.unkeyed
        )

    def run(self, anchors: Iterable[str]) -> Verification:
        # From which record on the key's directory says this log is keyed.
        since = keyed_since(self.key, self.path) if self.key is not None else None
        expected_prev = GENESIS
        expected_seq = 1
        prev_line: int | None = None
        pending: tuple[int, bytes] | None = None  # a line that is no record
        keyed_seen = False
        for number, record, raw in read_records(self.path):
            if record is None:
                if pending is not None:
                    return self.tampered(pending[0], None, "not a JSON record (edited or damaged)")
                pending = (number, raw)
                continue
            seq = _int(record.get("seq"))
            marker = record.get(TORN)
            if pending is not None and marker != torn_marker(pending[1]):
                return self.tampered(pending[0], None, "not a JSON record (edited or damaged)")
            if pending is None and marker is not None:
                return self.tampered(
                    number,
                    seq,
                    "it marks a line torn by a crash before it, but there is none: that line"
                    " was removed",
                )
            problem = self._record_problem(number, seq, record, raw)
            if problem is not None:
                return problem
            assert seq is not None
            keyed = self._record_key(number, seq, record, keyed_seen, since)
            if isinstance(keyed, Verification):
                return keyed
            keyed_seen = keyed
            if seq != expected_seq or record.get("prev_hash") != expected_prev:
                return self._out_of_chain(number, seq, expected_seq, prev_line)
            if pending is not None:
                self.notes.append(
                    f"line {pending[0]} was torn by a crash ({len(pending[1])} bytes cut short"
                    f" while being written) and marked by record {seq}: not an edit"
                )
                pending = None
            self.hashes[seq] = expected_prev = record["hash"]
            expected_seq = seq + 1
            prev_line = number
            self.count += 1
        if since is not None and max(self.hashes, default=0) < since:
            return self.tampered(
                None,
                max(self.hashes, default=0) + 1,
                f"this log was keyed from record {since} on, yet it ends before it: records"
                " were removed (and the rest rewritten without the key)",
            )
        return self._end(pending, prev_line, keyed_seen, anchors)

    def _record_problem(
        self, number: int, seq: int | None, record: dict[str, Any], raw: bytes
    ) -> Verification | None:
        """A record not as lockwatch wrote it: its hash, its bytes, its number."""
        if record.get("hash") != record_hash(record):
            return self.tampered(number, seq, "edited: its hash does not match its content")
        if raw != serialized(record):
            # Same content, other bytes (spacing, escapes, duplicate keys): not as written.
            return self.tampered(number, seq, "edited: not byte for byte as lockwatch wrote it")
        if seq is None:
            return self.tampered(number, None, "has no sequence number")
        return None

    def _keyed(
        self,
        entry: dict[str, Any],
        body: bytes,
        where: tuple[int | None, int | None],
        what: str,
        edited: str,
    ) -> Verification | None:
        """A keyed entry (a record, the head; `what` names it) checked with the key:
        a Verification when the key is missing or another, or when its MAC does not
        match its `body` (`edited` says so, at `where`: line and seq); else None."""
        seq = where[1]
        if self.key is None:
            return self.needs_key(seq, f"{what} is keyed")
        if entry.get(KEY_ID) != self.key.id:
            return self.needs_key(seq, f"{what} is keyed with key {entry.get(KEY_ID)}")
        if not self.key.check(body, entry.get(MAC)):
            return self.tampered(*where, edited)
        return None

    def _record_key(
        self, number: int, seq: int, record: dict[str, Any], keyed_seen: bool, since: int | None
    ) -> Verification | bool:
        """A record's MAC checked (or its absence, where the log is keyed): whether
        the records so far are keyed, or a Verification saying what is wrong."""
        if KEY_ID in record or MAC in record:
            edited = (
                "edited: its MAC does not match its content (changed by someone without the key)"
            )
            wrong = self._keyed(record, mac_body(record), (number, seq), f"record {seq}", edited)
            if wrong is not None:
                return wrong
            self.keyed += 1
            return True
        elif keyed_seen:
            return self.tampered(
                number,
                seq,
                "it has no MAC, yet the records before it are keyed: written or rewritten"
                " without the key",
            )
        elif since is not None and seq >= since:
            return self.tampered(
                number,
                seq,
                f"it has no MAC, yet this log is keyed from record {since} on (as"
                f" {registry_path(self.key).name} beside the key says): the log was"
                " rewritten without the key"
                if self.key is not None
                else "it has no MAC",
            )
        else:
            self.unkeyed += 1
        return keyed_seen

    def _out_of_chain(
        self, number: int, seq: int, expected: int, prev_line: int | None
    ) -> Verification:
        if seq < expected:
            return self.tampered(
                number, seq, f"out of order: record {seq} comes after record {expected - 1}"
            )
        if seq > expected:
            missing = (
                f"record {expected}" if seq == expected + 1 else f"records {expected}-{seq - 1}"
            )
            return self.tampered(
                number,
                seq,
                f"{missing} removed or moved: record {seq} follows record {expected - 1}",
            )
        if prev_line is None:
            return self.tampered(
                number, seq, "the chain is broken: record 1 does not start from the beginning"
            )
        # Its own hash is right and the next record names another: this record was
        # edited and its hash recomputed, the next one still names the original.
        return self.tampered(
            prev_line,
            seq - 1,
            f"edited: its hash was recomputed after a change, but record {seq} still names"
            " its original hash",
        )

    def _end(
        self,
        pending: tuple[int, bytes] | None,
        prev_line: int | None,
        keyed_seen: bool,
        anchors: Iterable[str],
    ) -> Verification:
        last_seq = max(self.hashes, default=0)
        ended = _ends_with_newline(self.path)
        head = read_head(self.path)
        torn = self._tail(pending, prev_line, ended, head, last_seq)
        if isinstance(torn, Verification):
            return torn
        problem = self._head_problem(head, pending, keyed_seen, last_seq)
        if problem is not None:
            return problem
        checked = self._anchors(anchors, last_seq)
        if isinstance(checked, Verification):
            return checked
        if torn is not None:
            self.notes.append(torn)
        return Verification(
            True,
            self.count,
            status=TORN_TAIL if torn is not None else INTACT,
            keyed=self.keyed,
            unkeyed=self.unkeyed,
            key_id=self.key.id if self.keyed and self.key else None,
            notes=tuple(self.notes),
            anchored=checked,
        )

    def _tail(
        self,
        pending: tuple[int, bytes] | None,
        prev_line: int | None,
        ended: bool,
        head: Any,
        last_seq: int,
    ) -> Verification | str | None:
        """How the log ends (`ended`: with a newline): whole (None), torn by a
        crash (the note saying so), or edited (a Verification)."""
        head_seq = head.get("seq") if isinstance(head, dict) else None
        if pending is not None:
            if ended:
                return self.tampered(pending[0], None, "not a JSON record (edited or damaged)")
            return (
                f"the last line (line {pending[0]}, {len(pending[1])} bytes) was cut short"
                " while it was being written: torn by a crash, not an edit (the next record"
                " lockwatch writes marks it)"
            )
        if self.count and not ended:
            if head_seq == last_seq:
                return self.tampered(
                    prev_line,
                    last_seq,
                    "edited or cut short: the last record does not end its line",
                )
            return (
                f"record {last_seq} was written whole but not its newline: an append"
                " interrupted by a crash, not an edit"
            )
        return None

    def _head_problem(
        self, head: Any, pending: tuple[int, bytes] | None, keyed_seen: bool, last_seq: int
    ) -> Verification | None:
        """The head file missing, damaged, unkeyed or naming another record than
        the log holds; None when it vouches for the log."""
        name = head_path(self.path).name
        if head is None:
            if self.count or pending is not None:
                return self.tampered(
                    None,
                    None,
                    f"its head file {name} is missing, so removals from the end cannot be ruled"
                    " out (lockwatch writes the head before the log)",
                )
            return self.tampered(
                None,
                None,
                f"the log is empty and its head file {name} is missing: it was emptied"
                " (lockwatch writes the head before the log, and never empties either)",
            )
        if not isinstance(head, dict) or not _valid_head(head):
            return self.tampered(
                None, None, f"its head file {name} is damaged: it is not a head lockwatch writes"
            )
        problem = self._head_key(head, keyed_seen)
        if problem is not None:
            return problem
        return self._head_seq(int(head["seq"]), str(head["hash"]), keyed_seen, last_seq)

    def _head_seq(
        self, head_seq: int, head_hash: str, keyed_seen: bool, last_seq: int
    ) -> Verification | None:
        """The record the head names against the log's last."""
        name = head_path(self.path).name
        if head_seq > last_seq:
            gone = (
                f"record {last_seq + 1}"
                if head_seq == last_seq + 1
                else f"records {last_seq + 1}-{head_seq}"
            )
            return self.tampered(
                None,
                last_seq + 1,
                f"{gone} removed from the end: the head says the log goes on to record"
                f" {head_seq}, it stops at record {last_seq}",
            )
        named = self.hashes.get(head_seq, GENESIS) if head_seq else GENESIS
        if head_hash != named:
            return self.tampered(
                None,
                head_seq or None,
                f"record {head_seq} is not the record the head names: one of them was replaced"
                if head_seq
                else f"the head of an empty log names a record: {name} was replaced",
            )
        if head_seq < last_seq:
            self.notes.append(
                f"the head names record {head_seq}, the log goes on to record {last_seq}:"
                " lockwatch was stopped (a crash, a full disk) between writing a record and"
                " its head"
                + ("" if keyed_seen else "; unkeyed, nothing vouches for the records after it")
            )
        return None

    def _head_key(self, head: dict[str, Any], keyed_seen: bool) -> Verification | None:
        name = head_path(self.path).name
        if KEY_ID in head or MAC in head:
            edited = f"the head {name} was edited: its MAC does not match its content"
            return self._keyed(head, head_mac_body(head), (None, None), f"the head {name}", edited)
        if keyed_seen:
            return self.tampered(
                None,
                None,
                f"the head {name} has no MAC, yet the log is keyed: it was rewritten without"
                " the key",
            )
        return None

    def _anchors(self, anchors: Iterable[str], last_seq: int) -> int | Verification:
        """How many records match what was anchored; a Verification if one does not."""
        real = os.path.realpath(self.path)
        matched = 0
        for line in anchors:
            found = _ANCHOR.search(line.strip())
            if found is None or (found[3] is not None and found[3] != real):
                continue
            seq, anchored = int(found[1]), found[2]
            if seq > last_seq:
                return self.tampered(
                    None,
                    seq,
                    f"record {seq} was anchored (syslog) but is not in the log: removed",
                )
            if self.hashes.get(seq) != anchored:
                return self.tampered(
                    None,
                    seq,
                    f"record {seq} is not the record anchored in syslog: the log was rewritten",
                )
            matched += 1
        return matched


def _valid_head(head: dict[str, Any]) -> bool:
    seq = _int(head.get("seq"))
    return seq is not None and seq >= 0 and isinstance(head.get("hash"), str)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return True
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
