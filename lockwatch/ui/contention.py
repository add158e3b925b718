"""Who waits on whom: each server's blocking tree, each root blocker's blast
radius, and the scope conflicts between lock files."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from lockwatch.model.blocking import BlockNode
from lockwatch.model.board import Board
from lockwatch.model.humanize import duration
from lockwatch.model.pg import PgBackend
from lockwatch.ui.safe import clean


@dataclass(slots=True)
class _Session:
    backend: PgBackend
    waiting_since: datetime | None = None
    wants: str | None = None
    holds: int = 0


def _sessions(board: Board) -> dict[tuple[str, int | str], _Session]:
    found: dict[tuple[str, int | str], _Session] = {}
    for entry in board.entries.values():
        pg = entry.lock.pg
        if pg is None:
            continue
        backend = pg.backend
        key: int | str = (
            backend.pid if backend.pid is not None else f"prepared:{backend.prepared_gid}"
        )
        session = found.get((pg.server, key))
        if session is None:
            session = found[(pg.server, key)] = _Session(backend)
        if pg.granted:
            session.holds += 1
        else:
            session.waiting_since = pg.wait_start
            session.wants = f"{pg.mode} on {entry.lock.name}"  # cleaned where shown
    return found


def _longest_wait(node: BlockNode, waits: dict[int | str, datetime | None], now: datetime) -> float:
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


class ContentionTree(Tree[str]):
    """Rebuilt only when a Postgres lock changed; ages follow the tick."""

    DEFAULT_CSS = """
    ContentionTree { background: $surface; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("Contention", id=id)
        self.show_root = False
        self._built: tuple[int, int, int] | None = None

    def update_from(self, board: Board, now: datetime, force: bool = False) -> None:
        # Rebuilt whenever locks changed, and every few seconds so wait times move;
        # the cursor stays on its line.
        key = (board.pg_generation, board.generation, int(now.timestamp()) // 5)
        if not force and key == self._built:
            return
        self._built = key
        line = self.cursor_line
        self.clear()
        sessions = _sessions(board)
        trees = board.blocking_trees()
        any_tree = False
        for server, tree in sorted(trees.items()):
            any_tree = True
            waits = {k[1]: s.waiting_since for k, s in sessions.items() if k[0] == server}
            blocked = sum(root.total for root in tree.roots)
            title = Text(f"{clean(server)}: ", style="bold")
            if tree.roots or tree.cycles:
                title.append(f"{len(tree.roots)} root blocker(s), {blocked} session(s) held up")
            else:
                title.append("nobody waits", style="dim")
            branch = self.root.add(title, expand=True)
            for root in tree.roots:
                self._add(branch, root, server, sessions, waits, now, top=True)
            for cycle in tree.cycles:
                members = " → ".join(clean(str(m)) for m in cycle)
                branch.add_leaf(
                    Text(f"wait-for cycle (deadlock until deadlock_timeout): {members}")
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
            self.root.add_leaf(
                Text(
                    "No contention: no Postgres session waits and no lock scopes overlap."
                    + ("" if trees else " (No PostgreSQL server is watched: add --pg DSN.)"),
                    style="dim",
                )
            )
        self.cursor_line = line

    def _add(
        self,
        parent: TreeNode[str],
        root: BlockNode,
        server: str,
        sessions: dict[tuple[str, int | str], _Session],
        waits: dict[int | str, datetime | None],
        now: datetime,
        top: bool,
    ) -> None:
        stack: list[tuple[TreeNode[str], BlockNode, bool]] = [(parent, root, top)]
        while stack:
            into, node, is_root = stack.pop()
            label = Text()
            session = sessions.get((server, node.id))
            label.append(
                f"pid {node.id}" if isinstance(node.id, int) else clean(str(node.id)), style="bold"
            )
            if session is not None:
                backend = session.backend
                who = ", ".join(x for x in (backend.user, backend.application) if x)
                if who:
                    label.append(f" ({clean(who)})")
                if backend.state:
                    label.append(f" {clean(backend.state)}")
                    if backend.state_since is not None:
                        label.append(f" {duration((now - backend.state_since).total_seconds())}")
                if session.waiting_since is not None and not is_root:
                    label.append(
                        f" · waiting {duration((now - session.waiting_since).total_seconds())}",
                    )
                if session.wants and not is_root:
                    label.append(f" for {clean(session.wants)}", style="dim")
            if node.total:
                label.append(
                    f" — blocks {node.direct} directly, {node.total} in total", style="bold"
                )
                if is_root:
                    label.append(f", longest wait {duration(_longest_wait(node, waits, now))}")
            if node.waiters:
                branch = into.add(label, expand=True)
                stack.extend((branch, waiter, False) for waiter in reversed(node.waiters))
            else:
                into.add_leaf(label)
