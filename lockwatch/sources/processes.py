"""Process facts from psutil, cached per pid for the life of one lookup table."""

from __future__ import annotations

from datetime import UTC, datetime

import psutil

from lockwatch.model.process import ProcessFacts


class PsutilProcesses:
    """Answers `facts(pid)` for this host. One instance per scan or tick, so a pid
    asked about by many locks costs one look, and a later tick sees fresh facts."""

    def __init__(self) -> None:
        self._cache: dict[int, ProcessFacts] = {}
        self._users: dict[int, str | None] = {}

    def facts(self, pid: int) -> ProcessFacts:
        cached = self._cache.get(pid)
        if cached is None:
            cached = self._cache[pid] = self._look(pid)
        return cached

    def _look(self, pid: int) -> ProcessFacts:
        dead = ProcessFacts(pid=pid, alive=False)
        try:
            # Cheap kill(pid, 0) first: most stale locks name dead pids.
            if pid <= 0 or not psutil.pid_exists(pid):
                return dead
            process = psutil.Process(pid)
            with process.oneshot():
                if process.status() == psutil.STATUS_ZOMBIE:
                    return dead  # exited; only its parent has not reaped it
                started = datetime.fromtimestamp(process.create_time(), tz=UTC)
                try:
                    cmdline = tuple(process.cmdline())
                except psutil.AccessDenied:
                    cmdline = ()
                user = self._user(process)
        except (psutil.NoSuchProcess, ValueError, OverflowError):
            return dead
        except psutil.AccessDenied:
            # It exists (kill(0) said so) but hides its details from us.
            return ProcessFacts(pid=pid, alive=True)
        return ProcessFacts(pid=pid, alive=True, started_at=started, cmdline=cmdline, user=user)

    def _user(self, process: psutil.Process) -> str | None:
        try:
            uid = process.uids().real
        except psutil.AccessDenied:
            return None
        if uid not in self._users:
            try:
                self._users[uid] = process.username()
            except (psutil.AccessDenied, KeyError):
                self._users[uid] = str(uid)
        return self._users[uid]
