"""The demo's guardian: started first, it reads what the demo started from its stdin;
if that pipe closes without the demo saying it cleaned up (the demo was SIGKILLed),
it kills the demo's children, stops its embedded PostgreSQL (or clears what it did
on a named server) and removes its workspace.

Run as a child like the others (`python -m lockwatch.demo.children guardian`), so it
stays as light as they are (psycopg and shutil only when it cleans up); apart from
them because it takes no lock: it only undoes what a dead demo left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lockwatch.demo import lockfiles as lf

if TYPE_CHECKING:
    from lockwatch.demo.children import Log


class Plan:
    """What the demo told the guardian it started."""

    def __init__(self) -> None:
        self.workspace: str | None = None
        self.keep = False
        self.children: list[int] = []
        self.postmaster: int | None = None
        self.datadir: str | None = None
        self.dsn: str | None = None
        self.application: str | None = None  # the prefix of the demo's sessions' names
        self.table: str | None = None

    def update(self, message: dict[str, object]) -> None:
        for key, value in message.items():
            if key == "child" and isinstance(value, int):
                self.children.append(value)
            elif key != "children" and hasattr(self, key):
                setattr(self, key, value)


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit status waits for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return lf.pid_alive(pid)
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def clean_up(plan: Plan, log: Log) -> None:
    """What the demo would have done on its way out, done for it."""
    for pid in plan.children:
        # Only if that pid is still one of ours (pids are reused).
        if "lockwatch.demo.children" in _cmdline(pid):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
    if plan.dsn and plan.application and plan.table:
        try:
            _drop_from_named_server(plan.dsn, plan.application, plan.table)
            log(f"dropped table {plan.table} and ended the demo's sessions")
        except Exception as exc:  # noqa: BLE001 - a last resort reports and goes on
            log(f"could not clean up the named server: {type(exc).__name__}: {exc}")
    if plan.datadir and not plan.postmaster:
        # The demo died while its server started: postmaster.pid may name it already.
        with contextlib.suppress(OSError, ValueError):
            text = (Path(plan.datadir) / "postmaster.pid").read_text()
            plan.postmaster = int(text.split("\n", 1)[0])
    if plan.postmaster and plan.datadir and plan.datadir in _cmdline(plan.postmaster):
        # SIGINT: PostgreSQL's fast shutdown; SIGQUIT: immediate, if that hangs.
        for signum, grace in ((signal.SIGINT, 10.0), (signal.SIGQUIT, 5.0)):
            with contextlib.suppress(OSError):
                os.kill(plan.postmaster, signum)
            if _wait_gone(plan.postmaster, grace):
                break
        log(f"stopped the embedded PostgreSQL (pid {plan.postmaster})")
    import shutil

    if plan.datadir:
        shutil.rmtree(plan.datadir, ignore_errors=True)
    if plan.workspace and not plan.keep:
        shutil.rmtree(plan.workspace, ignore_errors=True)


def _drop_from_named_server(dsn: str, application: str, table: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(
        dsn, autocommit=True, connect_timeout=5, application_name=f"{application}guardian"
    ) as conn:
        conn.execute("SET lock_timeout = '5s'")
        mine = "left(application_name, length(%s)) = %s AND pid <> pg_backend_pid()"
        conn.execute(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {mine}",
            (application, application),
        )
        deadline = time.monotonic() + 5.0
        while (
            time.monotonic() < deadline
            and conn.execute(
                f"SELECT 1 FROM pg_stat_activity WHERE {mine}", (application, application)
            ).fetchone()
        ):
            time.sleep(0.05)
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def guardian(log: Log) -> int:
    # Its own process group already keeps terminal signals away; a hangup must not
    # stop the one process that cleans up after a demo that died.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    plan = Plan()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if message.get("done"):
            return 0
        plan.update(message)
    log("the demo went away without cleaning up: cleaning up after it")
    clean_up(plan, log)
    return 0
