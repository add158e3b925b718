"""The kinds of action, in one table: each kind's verb, dashboard key, CLI
command, views, events and help. The dashboard's key bindings, footer, `?` help
and palette (ui/keys.py), the action commands (cli/act.py, cli/__init__.py)
and the events a done action notes (ui/flow.py) are all built from it, so a new
kind is one entry here plus a provider that offers it (`ActionProvider.kinds`);
`tests/test_action_kinds.py` fails for an entry that is incomplete.

Plain data: the CLI reads it without paying for the UI, the UI without click.
"""

from __future__ import annotations

from dataclasses import dataclass

from lockwatch.model.action import Kind

# Where a lock is selected: the views a kind's key may work in (ui/keys.py's View).
LOCKS = "locks"
CONTENTION = "contention"


@dataclass(frozen=True, slots=True)
class ActionKind:
    kind: Kind
    verb: str  # the confirmation button's word: "Break", "Cancel query"
    key: str  # the dashboard's key, as Textual names it ("b", "S")
    label: str  # the footer's word for the key
    help: str  # the key's line in `?`, the palette and `watch --help`
    palette: str  # its title in the command palette
    views: frozenset[str]  # the views its key works in (LOCKS, CONTENTION)
    command: str  # the CLI subcommand: `lockwatch break TARGET`
    short_help: str  # that command's line in `lockwatch --help`
    doc: str  # that command's --help text
    done: str  # the event a done action notes (model/events.py's EventKind value)
    footer: bool = True  # in the footer at 80 columns (else one `?` away)
    # The screens' own action for its key; None: the views' generic `act(kind)`.
    action: str | None = None
    # The command's options beyond the common ones: --force (with this help),
    # --pid (with this help), --expect-sha256.
    force_help: str | None = None
    pid_help: str | None = None
    expect_sha256: bool = False

    @property
    def key_action(self) -> str:
        """The action its key runs: the screens' own, or `act('<kind>')`."""
        return self.action or f"act({self.kind.value!r})"


_BREAK_DOC = """Break the lock TARGET, as its own tool would end it: a lock file
    is renamed into .lockwatch-broken/ beside it (kept, never deleted); a
    server's lock is dropped on its server, or its holder's session ended, only
    if it is still the one you saw. What each source's break does is its own
    (docs/actions.md), and so are its options above; the sources are listed
    below. A lock that is not stale (or free) needs --force, and some sources'
    always do (a kernel lock: its holders are signalled).

    \b
    Examples:
      lockwatch break /srv/locks/deploy.lock --reason "holder died, INC-123"
      lockwatch break file:/srv/locks/deploy.lock --reason x --expect-sha256 9f2c...
      lockwatch break "$(lockwatch ls --json | jq -r '.locks[0].id')" --reason x --yes
    """

_STEAL_DOC = """Steal the stale lock TARGET: the old lock is moved into
    .lockwatch-broken/ and a new one is written in its format, held by you
    (tower-fleet: new request_id, actor = you, fresh times, ttl kept). A lock
    that is not stale is never stolen, even with --force.

    Nothing heartbeats a lock file this command steals: it records your shell's
    pid (or --pid), so a pid format stays active while that process lives, and
    a heartbeat format (tower-fleet) goes stale after its ttl. The dashboard's
    steal (S) heartbeats what it holds for as long as it runs.

    A Postgres advisory lock is stolen by terminating its holder and taking the
    same key on lockwatch's own connection; this command then holds it in the
    foreground until Ctrl+C or `lockwatch release TARGET`.

    \b
    Examples:
      lockwatch steal logs/locks/deploy-prod.lock --reason "executor hung, INC-9"
      lockwatch steal .loops/.running/fix.lock --reason takeover --pid $$
    """

_RELEASE_DOC = """Release TARGET, a lock lockwatch wrote for you (see steal): the file is
    moved into .lockwatch-broken/; a Postgres advisory lock held by a
    `lockwatch steal` is let go by ending that lockwatch session. Locks that
    lockwatch does not hold are refused: break them instead.
    """

_CANCEL_DOC = """Cancel the current query of the session behind the Postgres lock
    TARGET, with pg_cancel_backend(pid). Its session and transaction stay: a
    session idle in a transaction keeps its locks (break ends it).
    """

_SELECTED = frozenset({LOCKS, CONTENTION})
_LOCKS = frozenset({LOCKS})

# In the order the keys are listed (`?`, the palette, the footer).
KINDS: tuple[ActionKind, ...] = (
    ActionKind(
        Kind.BREAK, "Break", "b", "Break",
        "break: move the lock file aside / pg_terminate_backend; not stale: type its name",
        "Break lock", _SELECTED, "break",
        "Break a lock: move the file aside, end the Postgres holder, signal a kernel"
        " lock's holders.",
        _BREAK_DOC, "broken", action="break_lock",
        force_help="Allow breaking a lock that is not stale (active or invalid).",
        expect_sha256=True,
    ),
    ActionKind(
        Kind.STEAL, "Steal", "S", "Steal",
        "steal a stale lock: rewritten for you in its own format, kept alive while you run",
        "Steal lock", _LOCKS, "steal",
        "Take a stale lock over: written anew for you, in its own format.",
        _STEAL_DOC, "stolen", action="steal_lock",
        pid_help="The pid the new lock records, for formats whose liveness is a pid"
        " [default: this command's parent, your shell].",
        expect_sha256=True,
    ),
    ActionKind(
        Kind.CANCEL, "Cancel query", "c", "Cancel query",
        "cancel a Postgres holder's current query (pg_cancel_backend)",
        "Cancel query", _SELECTED, "cancel",
        "Cancel a Postgres holder's current query (pg_cancel_backend).",
        _CANCEL_DOC, "query_cancelled", footer=False, action="cancel_query",
    ),
    ActionKind(
        Kind.RELEASE, "Release", "r", "Release", "release a lock lockwatch holds for you (★)",
        "Release lock", _LOCKS, "release",
        "Release a lock lockwatch took for you (steal).",
        _RELEASE_DOC, "let_go", footer=False, action="release_lock",
        pid_help="For pid files: the pid you stole it with [default: this command's parent].",
    ),
)  # fmt: skip


def table() -> tuple[ActionKind, ...]:
    """The kinds there are now (read at each use: a test adds one by patching KINDS)."""
    return KINDS


def kinds() -> tuple[Kind, ...]:
    """Every kind of action, in the table's order."""
    return tuple(found.kind for found in table())


def entry(kind: Kind) -> ActionKind:
    """`kind`'s entry; LookupError for a kind the table lacks."""
    for found in table():
        if found.kind is kind:
            return found
    raise LookupError(f"{kind.value}: no such action kind in lockwatch/model/kinds.py")


def by_command(command: str) -> ActionKind | None:
    return next((found for found in table() if found.command == command), None)
