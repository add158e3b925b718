"""`lockwatch ls --at T`: the locks as the history recorded them at T, in the
`ls` table or the `lockwatch.ls/1` document (with `as_of`)."""

from __future__ import annotations

import os
import sys

import click
import orjson

from lockwatch.cli.ending import fail, finish
from lockwatch.cli.history import EXIT_NO_HISTORY, open_reader, when
from lockwatch.model.text import terminal_safe


def ls_at(at_text: str, history_path: str | None, *, as_json: bool, long: bool) -> None:
    from lockwatch.history.api import HistoryError
    from lockwatch.model import blocking
    from lockwatch.model.report import lock_record, ls_json_bytes, records_json_array

    at = when(at_text, "--at")
    assert at is not None
    store = open_reader(history_path)
    try:
        entries = store.entries_at(at)
    except HistoryError as exc:
        fail(str(exc), EXIT_NO_HISTORY)
    assessed = [(entry.lock, entry.verdict) for entry in entries]
    host = store.host
    if as_json:
        records = [lock_record(lock, verdict, at) for lock, verdict in assessed]
        trees = sorted(blocking.trees(lock for lock, _ in assessed).items())
        pieces = list(ls_json_bytes(at, host, [records_json_array(records)], [], [], trees))
        sys.stdout.buffer.write(_with_as_of(pieces) + b"\n")
        sys.stdout.flush()
        finish(0)
    from lockwatch.cli.table import render_table

    click.echo(f"As of {at.astimezone().isoformat(timespec='seconds')} (recorded history):")
    for line in render_table(assessed, long=long, cwd=os.getcwd(), now=at):
        click.echo(line)
    if not assessed:
        click.echo(terminal_safe(f"No locks recorded at that time in {store.name}."))
    finish(0)


def _with_as_of(pieces: list[bytes | memoryview]) -> bytes:
    """The document with `as_of` (its `generated_at`) as its last field: said
    in bytes, not by reading the whole document back (10,000 locks are megabytes
    of JSON; orjson wrote every piece, so its bytes are what a round trip gives)."""
    head = bytes(pieces[0])  # the document's head: a few bytes
    cut = head.rindex(b',"locks":')  # then its array, or the array's bracket
    generated_at = orjson.loads(head[:cut] + b"}")["generated_at"]
    whole = b"".join(pieces)
    return whole[:-1] + b',"as_of":' + orjson.dumps(generated_at) + b"}"
