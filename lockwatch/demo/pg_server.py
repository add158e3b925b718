"""The demo's own PostgreSQL: an embedded throwaway server, started and removed
by the demo.

The embedded server comes from the `pgserver` package (the `demo` extra): a fresh data
directory in the temp dir, stopped and removed on exit. As root, pgserver would create
an OS account (`useradd pgserver`) to run PostgreSQL as: the demo must not change the
system, so as root it runs the machine's own PostgreSQL binaries (initdb, pg_ctl) as
an account that already exists (`postgres`, else `nobody`) instead.

Apart from the contention (postgres.py), which runs the same on this server or on
one the operator names: this is only where a server comes from and how it goes.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockwatch.demo.postgres import STOP_WAIT_S, PgSetupError

# Accounts PostgreSQL may run as when the demo runs as root: never one it creates.
RUN_AS = ("postgres", "nobody")


def pgserver_problem() -> str | None:
    """None when the embedded server can be had, else why not."""
    if _as_root():
        return _machine_problem()
    try:
        with warnings.catch_warnings():
            # platformdirs warns about XDG_RUNTIME_DIR on import; not the operator's concern.
            warnings.simplefilter("ignore")
            importlib.import_module("pgserver")
    except ImportError:
        return "the pgserver package is not installed"
    except Exception as exc:  # noqa: BLE001 - a broken install is a reason, not a crash
        return f"pgserver cannot be imported ({type(exc).__name__}: {exc})"
    return None


@dataclass
class EmbeddedServer:
    """A throwaway server from pgserver: its own data directory, removed on close."""

    datadir: Path
    dsn: str
    postmaster_pid: int | None
    _server: Any

    @classmethod
    def start(cls, announce: Callable[[Path], None] | None = None) -> EmbeddedServer:
        """In the system's temp directory, always: pgserver runs PostgreSQL as another
        OS user when we are root, and opens up the parents of its data directory to
        that user (which /tmp needs not, and a private directory may not allow).

        `announce` hears of the data directory before any server runs there (the
        guardian must know, should the demo die while the server starts)."""
        problem = pgserver_problem()
        if problem is not None:
            raise PgSetupError(problem)
        if _as_root():
            return cls._start_machine(announce)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pgserver: Any = importlib.import_module("pgserver")
        datadir = Path(tempfile.mkdtemp(prefix="lockwatch-demo-pg-"))
        if announce is not None:
            announce(datadir)
        try:
            server = pgserver.get_server(datadir, cleanup_mode="delete")
            dsn = str(server.get_uri())
            pid = server.get_pid()
        except BaseException as exc:
            # Interrupted or failed half way: a server may run there all the same.
            stop_postmaster_in(datadir)
            shutil.rmtree(datadir, ignore_errors=True)
            if isinstance(exc, Exception):
                raise PgSetupError(
                    f"the embedded PostgreSQL did not start ({type(exc).__name__}: {exc})"
                ) from exc
            raise
        return cls(datadir, dsn, int(pid) if pid is not None else None, server)

    @classmethod
    def _start_machine(cls, announce: Callable[[Path], None] | None) -> EmbeddedServer:
        cluster = MachineCluster.create()
        if announce is not None:
            announce(cluster.datadir)
        try:
            cluster.start()
        except BaseException as exc:
            stop_postmaster_in(cluster.datadir)
            shutil.rmtree(cluster.datadir, ignore_errors=True)
            if isinstance(exc, Exception):
                raise PgSetupError(
                    f"the machine's PostgreSQL did not start ({type(exc).__name__}: {exc})"
                ) from exc
            raise
        return cls(cluster.datadir, cluster.dsn, cluster.postmaster_pid(), cluster)

    def close(self) -> None:
        try:
            self._server.cleanup()
            self._wait_postmaster_gone()
        finally:
            shutil.rmtree(self.datadir, ignore_errors=True)

    def _wait_postmaster_gone(self) -> None:
        # pg_ctl stop returns once postmaster.pid is removed, a moment before the
        # process itself is gone: "nothing survives the demo" means gone.
        import psutil

        if self.postmaster_pid is None:
            return
        with contextlib.suppress(psutil.Error):
            psutil.Process(self.postmaster_pid).wait(STOP_WAIT_S)


def _as_root() -> bool:
    return os.geteuid() == 0


def _bindir() -> Path | None:
    """The newest PostgreSQL server binaries on this machine (Debian keeps them in
    /usr/lib/postgresql/<version>/bin), or None."""
    found = [
        path.parent
        for path in Path("/usr/lib/postgresql").glob("*/bin/initdb")
        if path.parent.joinpath("pg_ctl").exists()
    ]
    for name in ("initdb", "pg_ctl"):
        on_path = shutil.which(name)
        if on_path is not None and not found:
            found.append(Path(on_path).parent)

    def version(bindir: Path) -> tuple[int, ...]:
        digits = bindir.parent.name
        return tuple(int(part) for part in digits.split(".") if part.isdigit())

    return max(found, key=version) if found else None


def _account() -> pwd.struct_passwd | None:
    for name in RUN_AS:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    return None


def _machine_problem() -> str | None:
    if _bindir() is None:
        return (
            "running as root, the demo uses the machine's PostgreSQL binaries (initdb,"
            " pg_ctl), and there are none"
        )
    if _account() is None:
        return f"running as root, the demo needs an existing account ({', '.join(RUN_AS)})"
    return None


@dataclass
class MachineCluster:
    """A throwaway cluster of the machine's own PostgreSQL, run as an existing
    unprivileged account, listening only on a socket in its data directory."""

    datadir: Path
    bindir: Path
    account: pwd.struct_passwd

    @classmethod
    def create(cls) -> MachineCluster:
        bindir, account = _bindir(), _account()
        if bindir is None or account is None:
            raise PgSetupError(_machine_problem() or "no PostgreSQL binaries")
        datadir = Path(tempfile.mkdtemp(prefix="lockwatch-demo-pg-"))
        os.chown(datadir, account.pw_uid, account.pw_gid)
        return cls(datadir, bindir, account)

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.datadir}"

    def _run(self, *args: str) -> None:
        subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            user=self.account.pw_uid,
            group=self.account.pw_gid,
            extra_groups=[],
            cwd=self.datadir,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(self.datadir)},
            check=True,
            capture_output=True,
            timeout=STOP_WAIT_S * 6,
        )

    def start(self) -> None:
        self._run(
            "initdb", "-D", str(self.datadir), "-U", "postgres", "-A", "trust", "-N",
            "-E", "UTF8", "--locale=C",
        )  # fmt: skip
        options = f"-c listen_addresses='' -k {self.datadir} -c max_prepared_transactions=10"
        log = str(self.datadir / "server.log")
        self._run("pg_ctl", "-D", str(self.datadir), "-o", options, "-l", log, "-w", "start")

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
        return None

    def cleanup(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._run("pg_ctl", "-D", str(self.datadir), "-m", "fast", "-w", "stop")
        stop_postmaster_in(self.datadir)


def stop_postmaster_in(datadir: Path) -> None:
    """Stop the server running on `datadir`, if any (its postmaster.pid says which):
    fast shutdown, then immediate if that hangs."""
    import psutil

    try:
        pid = int((datadir / "postmaster.pid").read_text().split("\n", 1)[0])
        process = psutil.Process(pid)
        if str(datadir) not in " ".join(process.cmdline()):
            return  # that pid is somebody else's now
    except (OSError, ValueError, psutil.Error):
        return
    for signum in (signal.SIGINT, signal.SIGQUIT):
        with contextlib.suppress(psutil.Error):
            process.send_signal(signum)
            process.wait(STOP_WAIT_S)
            return
