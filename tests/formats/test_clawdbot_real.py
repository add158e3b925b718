"""clawdbot's own locks, written and probed by clawdbot's real code.

The npm package's dist modules (`dist/agents/session-write-lock.js`,
`dist/infra/gateway-lock.js`, clawdbot@2026.1.24) only import node builtins, so
node runs them offline: a holder process takes the lock with clawdbot's acquire
function, and a probe (a fresh process) answers with clawdbot's own acquire and
a short timeout, "acquired" (it would break or take the lock) or "locked".

The package comes from $CLAWDBOT_PACKAGE_DIR (an unpacked `npm pack clawdbot`),
else fetched once with `npm pack` into a cache; without it, or without node, these skip.

Where the real code cannot produce a case (a lock from another host, garbage
bytes, a recycled pid's start time), the test writes the bytes itself,
byte-for-byte as clawdbot does, and says so.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.formats.common import (
    codes,
    dead_pid,
    kill_and_reap,
    ls_json,
    reap_groups,
    say,
    start_ready,
)
from tests.sandbox import tool_cache

VERSION = "2026.1.24"
NEEDED = ("package/dist/agents/session-write-lock.js", "package/dist/infra/gateway-lock.js")
# What of the package is unpacked: its modules (gateway-lock imports others) and
# package.json (which makes node read them as ES modules).
UNPACKED = ("package/dist", "package/package.json")


def _package() -> Path:
    """clawdbot's published package: $CLAWDBOT_PACKAGE_DIR (an unpacked `npm
    pack clawdbot`), else the two modules these tests run, fetched once from the
    npm registry into a cache (the real code, never an imitation)."""
    given = os.environ.get("CLAWDBOT_PACKAGE_DIR")
    if given:
        return Path(given)
    root = tool_cache() / f"clawdbot-{VERSION}"
    if all((root / name).is_file() for name in NEEDED) or shutil.which("npm") is None:
        return root / "package"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".fetching", "w") as guard:
        # Every pytest-xdist worker imports this module at once: one fetches, the
        # others wait here, then find it unpacked (never half-unpacked).
        fcntl.flock(guard, fcntl.LOCK_EX)
        if all((root / name).is_file() for name in NEEDED):
            return root / "package"
        try:
            packed = subprocess.run(
                ["npm", "pack", f"clawdbot@{VERSION}", "--silent", "--pack-destination", str(root)],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout.split()[-1]
            subprocess.run(
                ["tar", "-xzf", str(root / packed), "-C", str(root), *UNPACKED],
                capture_output=True,
                timeout=60,
                check=True,
            )
            (root / packed).unlink()
        except (OSError, IndexError, subprocess.SubprocessError):
            pass  # the skip below says where it was looked for
    return root / "package"


PACKAGE = _package()
DEADLINE = 60.0
MINUTE_MS = 60_000

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="clawdbot's Linux paths"),
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(
        not (PACKAGE / "dist/agents/session-write-lock.js").is_file(),
        reason=f"clawdbot's npm package is not unpacked at {PACKAGE}",
    ),
]

# argv: package dir, session|gateway, hold|probe, session file or state dir,
# clock offset in ms (the process's clock runs that far behind: how clawdbot's
# own code writes an old createdAt while its holder lives).
DRIVER = r"""
const [pkg, kind, action, target, offset] = process.argv.slice(2);
const shift = Number(offset || 0);
if (shift) {
  const Real = Date;
  globalThis.Date = class extends Real {
    constructor(...a) { if (a.length) super(...a); else super(Real.now() - shift); }
    static now() { return Real.now() - shift; }
  };
}
const { acquireSessionWriteLock } = await import(pkg + "/dist/agents/session-write-lock.js");
const { acquireGatewayLock } = await import(pkg + "/dist/infra/gateway-lock.js");
const timeoutMs = action === "probe" ? 400 : 5000;
const acquire = () => kind === "session"
  ? acquireSessionWriteLock({ sessionFile: target, timeoutMs })
  : acquireGatewayLock({ env: { CLAWDBOT_STATE_DIR: target }, timeoutMs, pollIntervalMs: 50 });
let lock;
try { lock = await acquire(); } catch (err) {
  process.stdout.write("locked " + err.message + "\n"); process.exit(0);
}
if (action === "probe") {
  await lock.release(); process.stdout.write("acquired\n"); process.exit(0);
}
process.stdout.write("held\n");
process.stdin.setEncoding("utf8");
process.stdin.on("data", async (line) => {
  if (line.trim() === "release") { await lock.release(); process.stdout.write("released\n"); }
});
setInterval(() => {}, 1 << 30);
"""


@dataclass
class Clawdbot:
    root: Path
    driver: Path
    procs: list[subprocess.Popen[str]]

    @property
    def sessions(self) -> Path:
        return self.root / "state/agents/main/sessions"

    @property
    def session_file(self) -> Path:
        return self.sessions / "abc123.jsonl"

    @property
    def session_lock(self) -> Path:
        return self.sessions / "abc123.jsonl.lock"

    @property
    def gateway_dir(self) -> Path:
        return self.root / "tmp" / f"clawdbot-{os.getuid()}"

    @property
    def gateway_lock(self) -> Path:
        config = str(self.root / "state/clawdbot.json")
        return self.gateway_dir / f"gateway.{hashlib.sha1(config.encode()).hexdigest()[:8]}.lock"

    def _argv(self, kind: str, action: str, offset_ms: int) -> list[str]:
        target = self.session_file if kind == "session" else self.root / "state"
        return ["node", str(self.driver), str(PACKAGE), kind, action, str(target), str(offset_ms)]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWDBOT_")}
        env.pop("VITEST", None)
        env.pop("NODE_ENV", None)
        env["TMPDIR"] = str(self.root / "tmp")
        return env

    def hold(self, kind: str, *, offset_ms: int = 0) -> subprocess.Popen[str]:
        # Bounded: the driver times out in 5 s.
        argv = self._argv(kind, "hold", offset_ms)
        return start_ready(argv, self.procs, env=self._env(), new_session=True)

    def probe(self, kind: str) -> str:
        """clawdbot's own answer, from a fresh process: "acquired" or "locked"."""
        done = subprocess.run(
            self._argv(kind, "probe", 0),
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[0]

    def ls(self, directory: Path) -> dict[str, Any]:
        """lockwatch's record for the one lock in `directory`."""
        home = self.root / "lockwatch-home"
        doc = ls_json(directory, home, cwd=self.root, timeout=DEADLINE)
        locks = [lock for lock in doc["locks"] if lock["path"].endswith(".lock")]
        assert len(locks) == 1, [lock["path"] for lock in doc["locks"]]
        found: dict[str, Any] = locks[0]
        return found


@pytest.fixture
def clawdbot(tmp_path: Path) -> Iterator[Clawdbot]:
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER)
    (tmp_path / "tmp").mkdir()
    bot = Clawdbot(tmp_path, driver, [])
    bot.sessions.mkdir(parents=True)
    try:
        yield bot
    finally:
        reap_groups(bot.procs, timeout=DEADLINE)


def kill(proc: subprocess.Popen[str]) -> None:
    kill_and_reap(proc, timeout=DEADLINE)


def release(proc: subprocess.Popen[str]) -> None:
    assert say(proc, "release") == "released\n"


# --- session write locks -------------------------------------------------------


def test_session_held_by_live_clawdbot(clawdbot: Clawdbot) -> None:
    holder = clawdbot.hold("session")
    raw = clawdbot.session_lock.read_text()
    assert raw.startswith('{\n  "pid": ') and not raw.endswith("\n")
    lock = clawdbot.ls(clawdbot.sessions)
    assert lock["format"] == "clawdbot-session"
    assert lock["name"] == "abc123"
    assert lock["state"] == "active"
    assert codes(lock) == []
    assert lock["holder"]["pid"] == holder.pid
    assert lock["scope"] == [str(clawdbot.session_file)]
    assert lock["next_change_at"] is not None  # 30 minutes after createdAt
    assert clawdbot.probe("session") == "locked"


def test_session_released(clawdbot: Clawdbot) -> None:
    holder = clawdbot.hold("session")
    release(holder)
    assert not clawdbot.session_lock.exists()
    assert clawdbot.probe("session") == "acquired"


def test_session_holder_killed_is_stale(clawdbot: Clawdbot) -> None:
    holder = clawdbot.hold("session")
    kill(holder)
    assert clawdbot.session_lock.exists()
    lock = clawdbot.ls(clawdbot.sessions)
    assert lock["state"] == "stale"
    assert codes(lock) == ["holder_dead"]
    assert clawdbot.probe("session") == "acquired"


def test_session_older_than_30_minutes_is_stale_with_live_holder(clawdbot: Clawdbot) -> None:
    # clawdbot's own code, its clock 31 minutes behind: a live holder whose lock
    # clawdbot removes from under it.
    holder = clawdbot.hold("session", offset_ms=31 * MINUTE_MS)
    lock = clawdbot.ls(clawdbot.sessions)
    assert lock["holder"]["pid"] == holder.pid
    assert lock["state"] == "stale"
    assert codes(lock) == ["too_old"]
    assert clawdbot.probe("session") == "acquired"


def test_session_29_minutes_old_is_active(clawdbot: Clawdbot) -> None:
    # The holder process started 29 minutes after its createdAt: clawdbot only
    # asks kill(pid, 0), so lockwatch must not call that a recycled pid.
    holder = clawdbot.hold("session", offset_ms=29 * MINUTE_MS)
    lock = clawdbot.ls(clawdbot.sessions)
    assert lock["holder"]["pid"] == holder.pid
    assert lock["state"] == "active"
    assert codes(lock) == []
    assert clawdbot.probe("session") == "locked"


@pytest.mark.parametrize("alive", [True, False], ids=["pid-alive-here", "pid-dead-here"])
def test_session_from_another_host(clawdbot: Clawdbot, alive: bool) -> None:
    # A byte-for-byte imitation (JSON.stringify(..., null, 2), no newline) of a
    # lock another host wrote to a shared state dir. The file names no host:
    # clawdbot checks its pid on this host like any other, and so does lockwatch.
    pid = os.getpid() if alive else dead_pid()
    created = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    clawdbot.session_lock.write_text(f'{{\n  "pid": {pid},\n  "createdAt": "{created}"\n}}')
    lock = clawdbot.ls(clawdbot.sessions)
    assert lock["state"] == ("active" if alive else "stale")
    assert codes(lock) == ([] if alive else ["holder_dead"])
    assert clawdbot.probe("session") == ("locked" if alive else "acquired")


@pytest.mark.parametrize(
    "content",
    ["", '{\n  "pid": 12', "\x00garbage", '{"pid": "12", "createdAt": "x"}', "[1]"],
    ids=["empty", "truncated", "binary", "wrong-types", "array"],
)
def test_session_bad_content(clawdbot: Clawdbot, content: str) -> None:
    # Written by the test: clawdbot never writes these, but a crash mid-write can
    # leave the first two. clawdbot's readLockPayload gives null and it removes
    # the file; lockwatch says invalid (never a guess at stale: an empty file is
    # also what a holder has between open("wx") and its write).
    clawdbot.session_lock.write_text(content)
    lock = clawdbot.ls(clawdbot.sessions)
    assert lock["format"] == "clawdbot-session"
    assert lock["state"] == "invalid"
    assert codes(lock)[0] in ("unparseable", "schema_violation")
    assert clawdbot.probe("session") == "acquired"


# --- the gateway lock ------------------------------------------------------------


def start_ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2 :].split()[19])


def test_gateway_held_by_live_clawdbot(clawdbot: Clawdbot) -> None:
    holder = clawdbot.hold("gateway")
    doc = json.loads(clawdbot.gateway_lock.read_text())
    assert list(doc) == ["pid", "createdAt", "configPath", "startTime"]
    assert doc["startTime"] == start_ticks(holder.pid)
    lock = clawdbot.ls(clawdbot.gateway_dir)
    assert lock["format"] == "clawdbot-gateway"
    assert lock["state"] == "active"
    assert codes(lock) == []
    assert lock["holder"]["pid"] == holder.pid
    assert lock["scope"] == [doc["configPath"]]
    assert clawdbot.probe("gateway") == "locked"


def test_gateway_hour_old_with_matching_start_is_active(clawdbot: Clawdbot) -> None:
    # clawdbot's own code, clock an hour behind: an alive owner (same start
    # ticks) is never stale, however old its lock.
    holder = clawdbot.hold("gateway", offset_ms=60 * MINUTE_MS)
    lock = clawdbot.ls(clawdbot.gateway_dir)
    assert lock["holder"]["pid"] == holder.pid
    assert lock["state"] == "active"
    assert codes(lock) == []
    assert clawdbot.probe("gateway") == "locked"


def test_gateway_released(clawdbot: Clawdbot) -> None:
    holder = clawdbot.hold("gateway")
    release(holder)
    assert not clawdbot.gateway_lock.exists()
    assert clawdbot.probe("gateway") == "acquired"


def test_gateway_holder_killed_is_stale(clawdbot: Clawdbot) -> None:
    holder = clawdbot.hold("gateway")
    kill(holder)
    lock = clawdbot.ls(clawdbot.gateway_dir)
    assert lock["state"] == "stale"
    assert codes(lock) == ["holder_dead"]
    assert clawdbot.probe("gateway") == "acquired"


def test_gateway_other_start_time_is_a_reused_pid(clawdbot: Clawdbot) -> None:
    # The real holder's bytes with startTime + 1, rewritten by the test
    # (compact JSON, key order as clawdbot writes it): what a recycled pid looks
    # like, since its live process started at another tick.
    holder = clawdbot.hold("gateway")
    doc = json.loads(clawdbot.gateway_lock.read_text())
    doc["startTime"] += 1
    clawdbot.gateway_lock.write_text(json.dumps(doc, separators=(",", ":")))
    lock = clawdbot.ls(clawdbot.gateway_dir)
    assert lock["state"] == "stale"
    assert codes(lock) == ["pid_reused"]
    assert lock["holder"]["pid"] == holder.pid
    assert clawdbot.probe("gateway") == "acquired"


def test_gateway_from_another_host_dead_pid(clawdbot: Clawdbot) -> None:
    # A byte-for-byte imitation: the gateway lock lives in the local $TMPDIR and
    # names no host, so "another host" can only mean a pid that is not running
    # here; clawdbot reads it as dead and so does lockwatch.
    clawdbot.gateway_dir.mkdir(parents=True)
    created = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    config = str(clawdbot.root / "state/clawdbot.json")
    clawdbot.gateway_lock.write_text(
        json.dumps(
            {"pid": dead_pid(), "createdAt": created, "configPath": config, "startTime": 4242},
            separators=(",", ":"),
        )
    )
    lock = clawdbot.ls(clawdbot.gateway_dir)
    assert lock["state"] == "stale"
    assert codes(lock) == ["holder_dead"]
    assert clawdbot.probe("gateway") == "acquired"


@pytest.mark.parametrize(
    "content", ["", '{"pid":12,"createdAt"', "\x00"], ids=["empty", "truncated", "binary"]
)
def test_gateway_bad_content(clawdbot: Clawdbot, content: str) -> None:
    # Written by the test. clawdbot waits on such a file until its mtime is 30 s
    # old, then removes it; lockwatch says invalid, never stale.
    clawdbot.gateway_dir.mkdir(parents=True)
    clawdbot.gateway_lock.write_text(content)
    lock = clawdbot.ls(clawdbot.gateway_dir)
    assert lock["format"] == "clawdbot-gateway"
    assert lock["state"] == "invalid"
    assert codes(lock)[0] == "unparseable"
    assert clawdbot.probe("gateway") == "locked"  # fresh mtime: clawdbot waits
