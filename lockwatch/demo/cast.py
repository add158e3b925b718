"""Who the demo starts, with which options, and what each one shows on screen.

Timings are chosen so that every state is on screen within 10 s of the start:
`invalid`, a scope conflict and a stale (too old) gitclaw lock at once; a stale
clawdbot lock (holder dead) once KILLED is SIGKILLed (3 s) and lockwatch's next pid
check (2 s); the hung tower-fleet executor's lock, stale 5 s after its last heartbeat
(1.25 s after it took the lock); the build's flock sentinel, free once its first
build ends (2-4 s) and lockwatch next asks the kernel (2 s). PostgreSQL's waiters
show from its first poll.
"""

from __future__ import annotations

from pathlib import Path

from lockwatch.demo.supervisor import Role
from lockwatch.demo.workspace import Workspace

KILLED = "clawdbot-nightly"  # the holder SIGKILLed mid-run
KILLED_SESSION = "nightly"


def killed_lock(w: Workspace) -> Path:
    """The lock KILLED holds when it is killed, left behind stale."""
    return w.memory(KILLED_SESSION) / ".lock"


def cast(w: Workspace) -> list[Role]:
    """The demo's child processes, in the order they start."""
    return [*_clocked(w), *_broken(w), *_busy(w), *_coming_and_going(w)]


def _tower(
    w: Workspace,
    name: str,
    lock: str,
    intent: str,
    version: str,
    actor: str,
    ttl: str,
    run: str,
    *more: str,
    about: str,
) -> Role:
    """A tower-fleet executor: the lock it takes for its intent (as `actor`, with a
    `ttl`), how long it runs, and its other options."""
    return Role(
        name,
        "tower",
        ("--locks", str(w.tower_locks), "--name", lock, "--intent", intent,
         "--intent-version", version, "--actor", actor, "--ttl", ttl, "--run", run, *more),
        about,
    )  # fmt: skip


def _loop(w: Workspace, name: str, scope: str, *more: str, about: str) -> Role:
    """A little-loops loop on `scope` of the demo's project, and its other options."""
    return Role(
        f"loop-{name}",
        "loops",
        ("--project", str(w.loops_project), "--name", name, "--scope", scope, *more),
        about,
    )


def _clocked(w: Workspace) -> list[Role]:
    """The holders whose timing the demo's promises rest on (see `clocks`)."""
    return [
        # Those whose clock matters start first: children start slowly when seventeen
        # of them share a couple of cores with an embedded PostgreSQL being set up.
        _tower(w, "tower-sync-hung", "tower-sync", "sync", "2.0.0", "claude-code", "5", "inf",
               "--hang-after", "1.3",
               about="hangs after one heartbeat: stale once its 5 s ttl runs out (steal it)"),
        Role(
            KILLED,
            "clawdbot",
            ("--memory", str(w.memory(KILLED_SESSION)), "--session", KILLED_SESSION,
             "--operation", "compact:memory", "--hold", "inf"),
            "nightly compaction, SIGKILLed after 3 s: its lock stays, holder dead (stale)",
        ),
    ]  # fmt: skip


def _broken(w: Workspace) -> list[Role]:
    """Locks left wrong: invalid, too old, or taken by two at once."""
    return [
        _tower(w, "tower-backup-invalid", "nightly-backup", "backup-db", "3.1.0", "cron", "30",
               "inf", "--ttl-as-string",
               about="built against a draft spec: ttl_seconds is a string (invalid)"),
        Role(
            "gitclaw-7-cancelled",
            "gitclaw",
            ("--locks", str(w.gitclaw_locks("runner-2")), "--issue", "7",
             "--cancelled-ago", "750"),
            "a run for issue #7 cancelled 12 minutes ago: its lock is too old (stale)",
        ),
        _loop(w, "fix-bugs", "src", "--run", "inf", "--racy-start",
              about="loop on src/, started in the same instant as refactor-api"),
        _loop(w, "refactor-api", "src/api", "--run", "inf", "--racy-start",
              about="loop on src/api: both passed the conflict check before either wrote"
              " (conflict)"),
    ]  # fmt: skip


def _busy(w: Workspace) -> list[Role]:
    """Sessions and runs contending for one lock each, on and off."""
    shared = str(w.memory("main"))
    runner = str(w.gitclaw_locks("runner-1"))
    return [
        Role(
            "clawdbot-main",
            "clawdbot",
            ("--memory", shared, "--session", "main", "--operation", "write:tasks.json",
             "--operation", "append:events.jsonl", "--operation", "write:state.json",
             "--hold", "0.3,1.5", "--pause", "0.5,2.5"),
            "main session: short writes to memory/, backs off while the lock is busy",
        ),
        Role(
            "clawdbot-heartbeat",
            "clawdbot",
            ("--memory", shared, "--session", "heartbeat", "--operation", "read:tasks.json",
             "--hold", "0.2,0.8", "--pause", "1,3"),
            "heartbeat check: brief reads under the same lock",
        ),
        Role(
            "clawdbot-cron",
            "clawdbot",
            ("--memory", shared, "--session", "cron-consolidate",
             "--operation", "consolidate:memory", "--hold", "3,6", "--pause", "4,8",
             "--delay", "3"),
            "cron consolidation: holds the lock for seconds; the others wait or give up",
        ),
        Role(
            "gitclaw-42-a",
            "gitclaw",
            ("--locks", runner, "--issue", "42", "--hold", "10,20", "--pause", "2,5"),
            "workflow runs for issue #42",
        ),
        Role(
            "gitclaw-42-b",
            "gitclaw",
            ("--locks", runner, "--issue", "42", "--hold", "10,20", "--pause", "2,5",
             "--delay", "0.3"),
            "more runs for issue #42: skipped while another run holds it",
        ),
        Role(
            "gitclaw-17",
            "gitclaw",
            ("--locks", runner, "--issue", "17", "--hold", "15,30", "--pause", "3,6"),
            "workflow runs for issue #17",
        ),
    ]  # fmt: skip


def _coming_and_going(w: Workspace) -> list[Role]:
    """Holders with a ttl and heartbeat, loops that give up or queue, builds under flock."""
    return [
        _tower(w, "tower-money-tracker", "money-tracker-production", "deploy-app", "1.2.0",
               "claude-code", "12", "20,40", "--pause", "2,4", "--ticket", "OPS-1187",
               about="deploys, heartbeating every 3 s (ttl 12 s)"),
        _tower(w, "tower-home-portal", "home-portal-staging", "migrate-db", "0.9.1", "ops-bot",
               "12", "10,25", "--pause", "3,6",
               about="migrations, heartbeating every 3 s (ttl 12 s)"),
        _loop(w, "docs-sweep", "docs", "--run", "6,10", "--pause", "2,4",
              about="loop on docs/: gives up while docs-api runs"),
        _loop(w, "docs-api", "docs/api", "--queue", "--run", "3,5", "--pause", "1,3", "--delay",
              "0.5",
              about="loop on docs/api with --queue: waits for docs-sweep, then takes its turn"),
        Role(
            "build-cache",
            "flock",
            ("--lock", str(w.builds / "cache.lock"), "--hold", "2,4", "--pause", "4,6"),
            "builds guarding an empty cache.lock with flock: active while held, free between",
        ),
    ]  # fmt: skip


def clocks(w: Workspace) -> list[Path]:
    """The locks whose timing the 10 s promise rests on: the demo lets their holders
    start before it loads the machine with an embedded PostgreSQL."""
    return [w.tower_locks / "tower-sync.lock", killed_lock(w)]


def readme(w: Workspace, audit_log: Path, postgres: bool) -> str:
    lines = [
        "lockwatch demo workspace",
        "========================",
        "",
        "Real processes take, hold, lose and fight over the locks under systems/.",
        "Each logs what it does in logs/<name>.log.",
        "",
    ]
    lines += [f"  {role.name:22} {role.about}" for role in cast(w)]
    if postgres:
        lines += [
            "",
            "PostgreSQL: advisory locks held and awaited (billing-sync, agent:42, named in",
            "lockwatch.toml), a leaked one (nightly-reindex), a row held idle in transaction",
            "with two waiters, and a three-deep blocking chain (see the Contention view).",
        ]
    lines += [
        "",
        "Try:",
        "  - break the stale locks (the nightly clawdbot lock, gitclaw issue 7)",
        "  - steal tower-sync, whose executor hung",
        f"  - read the audit log: lockwatch audit --audit-log {audit_log}",
        f"  - from another terminal: lockwatch ls -l {w.systems}",
        "  - containers/backup/run.pid names pid 1, a container's: unknown, never stale",
        "",
    ]
    return "\n".join(lines)
