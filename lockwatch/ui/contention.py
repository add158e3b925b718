"""Who waits on whom: each server's blocking tree (and the kernel's: processes
blocked on flock/fcntl locks), each root blocker's blast radius, and the scope
conflicts between lock files."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from lockwatch.model.blocking import BlockNode, tree_facts
from lockwatch.model.board import Board
from lockwatch.model.facts import Party
from lockwatch.model.humanize import duration
from lockwatch.sources import registry
from lockwatch.sources.filelocks import KERNEL_GROUP
from lockwatch.ui.fold import cut
from lockwatch.ui.keys import Move, move_bindings, moved
from lockwatch.ui.safe import clean


@dataclass(slots=True)
class _Session:
    """A node of a tree as a line says it: a Postgres session, or a process
    holding or awaiting kernel locks (which has no state and no wait start)."""

    # Who the session is, as its first lock's facts say it (a Postgres backend:
    # user, application, state); None, or no session: its process's command.
    party: Party | None = None
    command: str = ""
    waiting_since: datetime | None = None
    wants: str | None = None
    holds: int = 0
    # The lock an action on this node acts on: one it holds (ending the
    # session frees them all), else the one it waits for.
    lock_id: str | None = None


def _sessions(board: Board) -> dict[tuple[str, Hashable], _Session]:
    found: dict[tuple[str, Hashable], _Session] = {}
    for entry in board.entries.values():
        lock = entry.lock
        # A lock file a kernel lock is held on is that lock's node (one row per file).
        facts = tree_facts(lock)
        where = None if facts is None else facts.group()
        if facts is None or where is None:
            continue
        party = facts.party(lock)
        if party is None:
            continue
        key = (where, party.node)
        session = found.get(key)
        if session is None:
            session = found[key] = _Session(party)
        if entry.facts is not None and entry.facts.cmdline and not session.command:
            session.command = " ".join(entry.facts.cmdline)
        if party.granted:
            session.holds += 1
            if session.holds == 1:
                session.lock_id = lock.id
        else:
            if session.lock_id is None:
                session.lock_id = lock.id
            if party.waiting_since is not None:
                session.waiting_since = party.waiting_since
            session.wants = party.wants  # cleaned where shown
    return found


def _longest_wait(node: BlockNode, waits: dict[Hashable, datetime | None], now: datetime) -> float:
    longest = 0.0
    stack = list(node.waiters)
    while stack:
        waiter = stack.pop()
        since = waits.get(waiter.id)
        if since is not None:
            longest = max(longest, (now - since).total_seconds())
        stack.extend(waiter.waiters)
    return longest


def _describe(board: Board, lock_id: str) -> str:
    entry = board.entries.get(lock_id)
    if entry is None:
        return lock_id
    scope = ", ".join(entry.lock.scope)
    return clean(f"{entry.lock.name} ({scope})" if scope else entry.lock.name)


COMMAND_SHOWN = 32


def _short(command: str) -> str:
    return command if len(command) <= COMMAND_SHOWN else command[: COMMAND_SHOWN - 1] + "…"


def _waits_watched(board: Board) -> bool:
    """Whether a source that can see waits (a PostgreSQL server, the kernel) is
    watched, even if it holds no lock right now."""
    return any(
        (source := registry.by_name(status.kind)) is not None and source.sees_waits
        for status in board.all_statuses()
    )


class ContentionTree(Tree[str | None]):
    """Rebuilt only when a Postgres lock changed; ages follow the tick. Each
    session's node carries the lock an action on it acts on."""

    # The movement keys of every list (Textual's Tree binds only up and down).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(keys, action, show=False) for keys, action in move_bindings()
    ]

    # Each line fits the width, cut at a word with `…` (enter shows the whole
    # lock): nothing to scroll sideways, so no column offset is left behind.
    DEFAULT_CSS = """
    ContentionTree { background: $surface; padding: 0 1; overflow-x: hidden; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("Contention", id=id)
        self.show_root = False
        # enter on a session opens its lock (the app's NodeSelected handler);
        # on a heading it folds the heading.
        self.auto_expand = False
        self._built: tuple[int, int, int] | None = None
        # The selected session left (its lock is gone): its line, said as gone,
        # on top, the cursor on it until the operator moves (None: not gone).
        self.gone: Text | None = None
        # Each session's line as last built, by the lock an action on it acts on.
        self._labels: dict[str, Text] = {}
        self._gone_node: TreeNode[str | None] | None = None
        # The lock the operator's own action just ended: its session leaving is
        # no news, the cursor stays on its line (the session now there).
        self._acted: str | None = None

    def render_label(self, node: TreeNode[str | None], base_style: Style, style: Style) -> Text:
        label = super().render_label(node, base_style, style)
        # The guides before it: one level of indent per ancestor below the hidden root.
        depth = 0
        parent = node.parent
        while parent is not None and parent is not self.root:
            depth, parent = depth + 1, parent.parent
        return cut(label, self.scrollable_content_region.width - depth * self.guide_depth)

    def on_resize(self) -> None:
        self._invalidate()  # the labels are cut to the width: cut again

    @property
    def selected_lock(self) -> str | None:
        """The lock of the session under the cursor (None on a heading)."""
        node = self.cursor_node
        return node.data if node is not None else None

    @property
    def position(self) -> int:
        return self.cursor_line

    @property
    def positions(self) -> int:
        return self.last_line + 1

    @property
    def page(self) -> int:
        return max(1, self.scrollable_content_region.height)

    def acted_on(self, lock_id: str) -> None:
        """The operator's action on `lock_id` was done (see LockTable.acted_on)."""
        self._acted = lock_id
        if self.gone is not None and self.selected_lock is None:
            self._forget_gone()
            self._built = None  # drawn again without the gone line
            self.to_first_session()

    def action_move(self, move: str) -> None:
        self._acted = None
        step = Move(move)
        start = max(0, self.cursor_line)
        if self.gone is not None:
            self._forget_gone()
            start = -1 if step in (Move.DOWN, Move.PAGE_DOWN) else 0
        self.cursor_line = moved(step, start, self.positions, self.page)
        self.scroll_to_line(self.cursor_line, animate=False)

    def _forget_gone(self) -> None:
        self.gone = None
        if self._gone_node is not None:
            self._gone_node.remove()
            self._gone_node = None

    def _line_of(self, lock_id: str) -> int | None:
        for line in range(self.last_line + 1):
            node = self.get_node_at_line(line)
            if node is not None and node.data == lock_id:
                return line
        return None

    def to_first_session(self) -> None:
        """The cursor on the first session (the first root blocker), unless the
        operator already moved it to one (or it is on a session gone)."""
        if self.selected_lock is not None or self.gone is not None:
            return
        for line in range(self.last_line + 1):
            node = self.get_node_at_line(line)
            if node is not None and node.data is not None:
                self.cursor_line = line
                return

    def update_from(self, board: Board, now: datetime, force: bool = False) -> None:
        # Rebuilt whenever locks changed, and every few seconds so wait times move;
        # the cursor stays on its line.
        key = (board.waits_generation, board.generation, int(now.timestamp()) // 5)
        if not force and key == self._built:
            return
        self._built = key
        line = self.cursor_line
        selected = self.selected_lock
        before = self._labels
        self._labels = {}
        self._gone_node = None
        self.clear()
        sessions = _sessions(board)
        trees = board.blocking_trees()
        any_tree = False
        for server, tree in sorted(trees.items()):
            any_tree = True
            waits = {k[1]: s.waiting_since for k, s in sessions.items() if k[0] == server}
            blocked = sum(root.total for root in tree.roots)
            title = Text(f"{clean(server)}: ", style="bold")
            kind = "process(es)" if server == KERNEL_GROUP else "session(s)"
            if server == KERNEL_GROUP:
                title = Text("kernel locks (flock, fcntl): ", style="bold")
            if tree.roots or tree.cycles:
                title.append(f"{len(tree.roots)} root blocker(s), {blocked} {kind} held up")
            else:
                title.append("nobody waits", style="dim")
            branch = self.root.add(title, expand=True)
            for root in tree.roots:
                self._add(branch, root, server, sessions, waits, now, top=True)
            for cycle in tree.cycles:
                members = " → ".join(clean(str(m)) for m in cycle)
                branch.add_leaf(
                    Text(
                        f"wait-for cycle (the kernel refuses the last lock with EDEADLK): {members}"
                        if server == KERNEL_GROUP
                        else f"wait-for cycle (deadlock until deadlock_timeout): {members}"
                    )
                )
        conflicts = board.conflicts()
        if conflicts:
            any_tree = True
            # Each overlapping pair once.
            pairs = sorted({(min(a, b), max(a, b)) for a, others in conflicts for b in others})
            branch = self.root.add(
                Text(f"Scope conflicts: {len(pairs)} overlapping pair(s)", style="bold"),
                expand=True,
            )
            for first, second in pairs:
                branch.add_leaf(Text(f"{_describe(board, first)}  ⟷  {_describe(board, second)}"))
        if not any_tree:
            # Two lines, each whole at 80 columns: lines are cut to the width.
            self.root.add_leaf(
                Text(
                    "No contention: nobody waits on a lock and no lock scopes overlap.",
                    style="dim",
                )
            )
            if not trees and not _waits_watched(board):
                self.root.add_leaf(
                    Text(
                        "No PostgreSQL server or kernel watched: add --pg DSN or --kernel.",
                        style="dim",
                    )
                )
        self._follow(line, selected, before)

    def _follow(self, line: int, selected: str | None, before: dict[str, Text]) -> None:
        """The cursor back on its session, by its lock, wherever the rebuild put
        it; a session that left is said gone, never replaced by the one below."""
        if selected is not None:
            found = self._line_of(selected)
            if found is not None:
                self.cursor_line = found
                return
            if selected == self._acted:
                self.cursor_line = min(line, self.last_line)
                return
            said = before.get(selected)
            self.gone = Text("✖ gone: ", style="bold")
            self.gone.append_text(said if said is not None else Text(clean(selected)))
            self.gone.append(" · nothing to act on; move to pick another session", style="dim")
        if self.gone is not None:
            self._gone_node = self.root.add_leaf(self.gone, before=0)
            self.cursor_line = 0
            return
        self.cursor_line = line

    def _add(
        self,
        parent: TreeNode[str | None],
        root: BlockNode,
        server: str,
        sessions: dict[tuple[str, Hashable], _Session],
        waits: dict[Hashable, datetime | None],
        now: datetime,
        top: bool,
    ) -> None:
        stack: list[tuple[TreeNode[str | None], BlockNode, bool]] = [(parent, root, top)]
        while stack:
            into, node, is_root = stack.pop()
            label = Text()
            session = sessions.get((server, node.id))
            label.append(
                f"pid {node.id}" if isinstance(node.id, int) else clean(str(node.id)), style="bold"
            )
            # The numbers first, the text after: at 80 columns the end is cut, and a
            # root's session ("report-job idle in transaction 32s") comes before
            # its longest wait (issue 37).
            if node.total:
                counted = f"{node.direct} directly"
                if node.total != node.direct:
                    counted = f"{node.total} ({counted})"
                label.append(f" blocks {counted} ·", style="bold")
            party = session.party if session is not None else None
            if session is not None and (party is None or not party.session):
                if session.command:  # short: the counts after it must stay in view
                    label.append(f" ({clean(_short(session.command))})")
            elif party is not None:
                if party.who:
                    label.append(f" ({clean(party.who)})")
                if party.state:
                    label.append(f" {clean(party.state)}")
                    if party.state_since is not None:
                        label.append(f" {duration((now - party.state_since).total_seconds())}")
            if node.total and is_root and server != KERNEL_GROUP:  # no wait start in the kernel
                label.append(f" · longest wait {duration(_longest_wait(node, waits, now))}")
            if session is not None and not is_root:
                if session.waiting_since is not None:
                    label.append(
                        f" · waiting {duration((now - session.waiting_since).total_seconds())}",
                    )
                elif session.wants:
                    label.append(" · waiting")
                if session.wants:
                    label.append(f" for {clean(session.wants)}", style="dim")
            data = session.lock_id if session is not None else None
            if data is not None:
                self._labels[data] = label
            if node.waiters:
                branch = into.add(label, data=data, expand=True)
                stack.extend((branch, waiter, False) for waiter in reversed(node.waiters))
            else:
                into.add_leaf(label, data=data)
