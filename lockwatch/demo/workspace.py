"""The demo's temporary workspace: where its lock files, logs and audit log live.

    lockwatch-demo-XXXX/
      README.txt            what is here and what to try
      lockwatch.toml        advisory key names (and the embedded server), for `ls --config`
      audit.jsonl           break/steal audit log (unless --audit-log says otherwise)
      logs/<child>.log      what each child did, one line per event
      systems/              the only tree the dashboard watches
        clawdbot/<session>/memory/.lock
        gitclaw/<runner>/.GITCLAW/state/locks/<issue>.lock
        tower-fleet/logs/locks/<lock_name>.lock
        little-loops/.loops/.running/<loop>.lock   (project dirs src/, src/api, docs/ ...)
        builds/cache.lock   an empty sentinel held with flock between builds
        containers/backup/run.pid   written by a containerised job: pid 1, its own
                                    namespace's (lockwatch cannot tell: unknown)

The embedded PostgreSQL's data directory is elsewhere: the dashboard must not list its
postmaster.pid, and pgserver opens up its parent directories to another OS user.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

PREFIX = "lockwatch-demo-"
LOOPS_PROJECT_DIRS = ("src/api", "src/billing", "docs/api", "tests")


class _Under:
    """A place in the workspace, `parts` below its root (read as a property)."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, workspace: Workspace, owner: type | None = None) -> Path:
        return workspace.root.joinpath(*self.parts)


@dataclass(frozen=True, slots=True)
class Workspace:
    root: Path

    systems = _Under("systems")
    logs = _Under("logs")
    config_file = _Under("lockwatch.toml")
    audit_log = _Under("audit.jsonl")
    readme = _Under("README.txt")
    tower_locks = _Under("systems", "tower-fleet", "logs", "locks")
    loops_project = _Under("systems", "little-loops")
    builds = _Under("systems", "builds")

    def memory(self, session: str) -> Path:
        return self.systems / "clawdbot" / session / "memory"

    def gitclaw_locks(self, runner: str) -> Path:
        return self.systems / "gitclaw" / runner / ".GITCLAW" / "state" / "locks"


def create(base: Path | None = None) -> Workspace:
    """A fresh workspace under `base` (default: the system's temp directory)."""
    root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base)).resolve()
    workspace = Workspace(root)
    workspace.logs.mkdir()
    workspace.tower_locks.mkdir(parents=True)
    workspace.builds.mkdir(parents=True)
    # A job in a container writes its own pid, 1 there, into a mounted directory:
    # on this host that pid is init, and nobody can tell whether the job runs.
    jobs = workspace.systems / "containers" / "backup"
    jobs.mkdir(parents=True)
    write_text(jobs / "run.pid", "1\n")
    for sub in LOOPS_PROJECT_DIRS:
        (workspace.loops_project / sub).mkdir(parents=True)
    (workspace.loops_project / ".loops" / ".running").mkdir(parents=True)
    return workspace


def remove(workspace: Workspace) -> None:
    shutil.rmtree(workspace.root, ignore_errors=True)


def write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
