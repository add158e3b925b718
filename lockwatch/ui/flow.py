"""How the dashboard acts on a lock: plan → confirm → execute → report.

The view screens only say what the operator asked for (break this lock, break
the marked ones); this object does the rest the same way for every view:
plans the action against the board as it is now, shows a confirmation whose
facts keep ticking, runs the confirmed plan off the event loop (the action
core re-checks it, compare-and-swap), and reports the outcome as a
notification and as an event. It also keeps the locks lockwatch holds alive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.notifications import SeverityLevel

from lockwatch.actions.plan import Kind, Plan, describe, tombstone_place
from lockwatch.model.events import Event, EventKind
from lockwatch.model.holder import pid_here
from lockwatch.model.kinds import entry
from lockwatch.ui.confirm import Choosing, Confirmed, ConfirmScreen, QuitScreen
from lockwatch.ui.safe import clean

if TYPE_CHECKING:
    from lockwatch.actions.run import Outcome
    from lockwatch.actions.session import ActionSession
    from lockwatch.model.verdict import Verdict
    from lockwatch.ui.app import LockwatchApp


def verb_of(kind: Kind) -> str:
    """The confirm button's word for an action, as its table entry says it."""
    return entry(kind).verb


def done_event(kind: Kind) -> str:
    """The event a done `kind` notes (model/kinds.py): lockwatch's own EventKind
    where it has one, else the table's name for it."""
    done = entry(kind).done
    try:
        return EventKind(done)
    except ValueError:
        return done


# A bulk confirmation lists this many locks by name; the rest are counted.
BULK_LISTED = 20
# How long a toast of what happened stays (seconds); tests that picture one pin it.
SAY_SECONDS = 3.0


def facts_of(plan: Plan, now: datetime) -> list[tuple[str, str]]:
    """The confirmation's lines, less the one saying a name must be typed: the
    dialog's warning and prompt say that, right above the field."""
    return [(label, value) for label, value in describe(plan, now) if label != "confirm"]


def liveness(plan: Plan) -> str:
    """Whether a lock's holder can wake, for a steal's confirmation: a holder that
    is only hung comes back to a lock it thinks it still has."""
    alive = plan.verdict.alive
    pid = pid_here(plan.lock, plan.verdict)
    who = f"Its holder (pid {pid})" if pid is not None else "Its holder"
    if alive is True:
        return f"{who} is alive: it may wake and carry on as if it still held the lock."
    if alive is False:
        return f"{who} is not running: it cannot wake to use the lock."
    return (
        f"Whether {who[0].lower() + who[1:]} is alive is not known here: it may wake and"
        " carry on as if it still held the lock."
    )


def confirm_words(kind: Kind, plan: Plan) -> tuple[str | None, str, str | None]:
    """What a confirmation asks typed (None: nothing), the prompt's words for it,
    and its warning."""
    lock = plan.lock
    facts = lock.facts
    warning = liveness(plan) if kind is Kind.STEAL else None
    must_type = None
    must_type_what = f"the lock's name to {kind.value} it anyway"
    if plan.needs_name:
        # Its holder's session by name where the action ends a session; else the lock's.
        word = facts.confirm_word(lock) if facts is not None else None
        must_type = word or lock.name
        if word:
            must_type_what = f"the session's name to {kind.value} it anyway"
        why = (
            plan.why_name
            if plan.why_name
            else f"{lock.name} is {plan.verdict.state}, not stale: someone may be using it"
        )
        # What to type is the prompt's: the warning says why.
        warning = " ".join(part for part in (warning, f"{why}.") if part)
    return must_type, must_type_what, warning


def drift_note(opened: Plan, now: Plan, verdict: Verdict, drifted: bool) -> str | None:
    """What a confirmation says changed since it opened on `opened`: what it would
    do now, when that drifted; else a new verdict; else nothing."""
    if drifted:
        return (
            f"changed while open: it would now {now.event.replace('_', ' ')}"
            f" on {now.lock.name}, not what this opened on; confirming does"
            " nothing: open it again"
        )
    if verdict.state is not opened.verdict.state:
        return (
            f"changed while open: now {verdict.state.value}, was"
            f" {opened.verdict.state.value} when this opened"
        )
    return None


class ActionFlow:
    """Break, steal, release and cancel from any view, behind a confirmation."""

    def __init__(self, app: LockwatchApp, actions: ActionSession) -> None:
        self.app = app
        self.actions = actions

    # -- one lock ------------------------------------------------------------------

    def act(self, kind: Kind, lock_id: str | None) -> None:
        """Ask to `kind` the lock `lock_id` (the selection of the view on screen)."""
        if lock_id is None:
            self._say("no lock selected", severity="warning")
            return
        board = self.app.board
        offered = (
            self.actions.choices(kind, board.entries[lock_id].lock) if lock_id in board else None
        )
        # The way chosen in the dialog (the first, the default, until another is).
        chosen = [0]

        def given() -> dict[str, Any]:
            return {} if offered is None else dict(offered.options[chosen[0]].given)

        plan = self.plan(kind, lock_id, **given())
        if plan is None:
            self._say("that lock is gone", severity="warning")
            return
        if plan.refusal is not None:
            self._refused(plan)
            return
        lock = plan.lock
        facts = lock.facts
        now = self.app.clock.now()
        must_type, must_type_what, warning = confirm_words(kind, plan)
        title = facts.confirm_title(lock, kind, now) if facts is not None else None
        # What the dialog shows now, which is what confirming acts on.
        shown = [plan]
        # What each way chosen acted on when first shown: a plan that comes to act
        # on another lock, or do another thing (a lock file's holder gone and a new
        # one signalled; a kernel lock released and the file moved instead), is
        # never confirmed with the name typed for the first.
        first: dict[int, tuple[str, str]] = {chosen[0]: (plan.lock.id, plan.event)}
        drifted = [False]

        def current() -> tuple[list[tuple[str, str]], str | None]:
            board = self.app.board
            now = self.app.clock.now()
            # The row the operator chose: the plan may act through another lock
            # (a lock file's, on its kernel lock), which the board need not list.
            if lock_id not in board:
                return facts_of(shown[0], now), "the lock is gone since this opened"
            verdict = board.verdict_at(lock_id, now)
            if facts is not None:
                # The title's ages on the body's clock (its `now`), not as opened.
                now_title = facts.confirm_title(board.entries[lock_id].lock, kind, now)
                screen.set_title(now_title or f"{kind.value.capitalize()} {lock.name}?")
            peers = [entry.lock for entry in board.entries.values()]
            shown[0] = self.actions.plan(
                kind, board.entries[lock_id].lock, verdict, peers, **given()
            )
            was = first.setdefault(chosen[0], (shown[0].lock.id, shown[0].event))
            if was != (shown[0].lock.id, shown[0].event):
                drifted[0] = True
            changed = drift_note(plan, shown[0], verdict, drifted[0])
            # The way chosen may be another action (a queue head's cancel): the
            # button says what confirming does now.
            screen.set_verb(verb_of(shown[0].kind))
            return facts_of(shown[0], now), changed

        screen = ConfirmScreen(
            title or f"{kind.value.capitalize()} {lock.name}?",
            facts_of(plan, now),
            verb=verb_of(plan.kind),
            must_type=must_type,
            must_type_what=must_type_what,
            warning=warning,
            refresh=current,
            choice=None
            if offered is None
            else Choosing(
                offered.what,
                tuple(option.label for option in offered.options),
                partial(chosen.__setitem__, 0),
            ),
        )

        self.app.push_screen(screen, partial(self._confirmed, lock_id, shown, drifted))

    def _confirmed(
        self, lock_id: str, shown: list[Plan], drifted: list[bool], result: Confirmed | None
    ) -> None:
        """The confirmation's answer, acted on: `shown[0]` is what the dialog showed
        last; `drifted[0]` whether it came to act on another lock or do another thing."""
        if result is None:
            self._nothing_done()
        elif drifted[0]:
            self._say("changed while open — nothing done; open it again", "warning")
        elif shown[0].refusal is not None:
            self._refused(shown[0])
        elif (
            shown[0].needs_name
            and not result.forced
            and shown[0].lock.id != lock_id
            and shown[0].lock.id in self.app.board
        ):
            # The way chosen acts on another lock (the root a waiter queues behind),
            # whose name this dialog did not ask for: its own confirmation asks.
            self.act(shown[0].kind, shown[0].lock.id)
        else:
            self._execute([shown[0]], result.reason, result.forced, row=lock_id)

    def plan(self, kind: Kind, lock_id: str, **given: Any) -> Plan | None:
        """`given`: the way chosen among the action's choices (its source's names)."""
        board = self.app.board
        if lock_id not in board:
            return None
        lock = board.entries[lock_id].lock
        peers = []
        # The other locks of its wait-for graph (its server's): a session's other
        # locks count in what ending it does.
        group = lock.facts.group() if lock.facts is not None else None
        if group is not None:
            peers = [
                entry.lock
                for entry in board.entries.values()
                if entry.lock.facts is not None and entry.lock.facts.group() == group
            ]
        # Judged as of the dashboard's clock now, as the table shows it: the board
        # keeps a verdict until its deadline, and its age and messages with it.
        verdict = board.verdict_at(lock_id, self.app.clock.now())
        return self.actions.plan(kind, lock, verdict, peers, **given)

    # -- the marked locks ----------------------------------------------------------

    def act_on_marked(self, marked: list[str], shown: set[str], done: Callable[[], None]) -> None:
        """Ask to break every marked lock; `shown`: the ids the filter lets
        through (marked rows it hides are listed first); `done` runs once the
        batch is confirmed."""
        plans = [plan for lock_id in marked if (plan := self.plan(Kind.BREAK, lock_id))]
        if not plans:
            return
        hidden = sum(1 for plan in plans if plan.lock.id not in shown)
        tombstones = tombstone_place(self.actions.tombstone_dir)
        not_stale = sum(1 for plan in plans if plan.needs_name or plan.refusal)
        lines = [
            ("marked", f"{len(plans)} lock(s)"),
            ("hidden", f"{hidden} of them hidden by the current filter"),
        ]
        if not_stale:
            lines.append(
                (
                    "skipped",
                    f"{not_stale} of them {'is' if not_stale == 1 else 'are'} not stale (or"
                    " cannot be broken): refused and audited; break those one at a time",
                )
            )
        lines.append(
            (
                "effect",
                f"each lock file is renamed into {tombstones} (kept, never deleted); each"
                " Postgres holder is ended with pg_terminate_backend",
            )
        )
        # Marked rows the filter hides first: nobody may break them unawares.
        ordered = sorted(plans, key=lambda plan: plan.lock.id in shown)
        for plan in ordered[:BULK_LISTED]:
            name = plan.lock.name + ("" if plan.lock.id in shown else " (hidden)")
            facts = plan.lock.facts
            where = plan.lock.path or (facts and facts.place(plan.lock)) or plan.lock.id
            lines.append((plan.verdict.state.value, f"{name}  {where}"))
        if len(plans) > BULK_LISTED:
            lines.append(("", f"… and {len(plans) - BULK_LISTED} more"))
        count = str(len(plans))
        screen = ConfirmScreen(
            f"Break {count} marked locks?",
            lines,
            verb="Break all",
            must_type=count,
            must_type_what="the number of marked locks to confirm",
            warning="Each lock is checked again (compare-and-swap) and audited on its own.",
        )

        def answered(result: Confirmed | None) -> None:
            if result is None:
                self._nothing_done()
                return
            # The count confirms the batch; it never stands for each lock's name.
            self._execute(plans, result.reason, False)
            done()

        self.app.push_screen(screen, answered)

    # -- carrying out and saying so ------------------------------------------------

    def _execute(
        self, plans: list[Plan], reason: str, forced: bool, row: str | None = None
    ) -> None:
        """`row`: the lock the operator chose, where the plan acts through another."""

        def run() -> None:
            outcomes = [self.actions.run(plan, reason, force=forced) for plan in plans]
            self.app.call_from_thread(self._report, plans, outcomes)
            done = [plan.lock.id for plan, o in zip(plans, outcomes, strict=True) if o.ok]
            if done and row is not None:
                done.append(row)
            if done:
                self.app.call_from_thread(self.app.acted_on, done)

        what = plans[0].kind.value if len(plans) == 1 else "bulk break"
        self._work(run, what, plans, group="actions")

    def _work(
        self, work: Callable[[], None], what: str, plans: Sequence[Plan] = (), **options: Any
    ) -> None:
        """Run `work` in a worker thread. Workers run with exit_on_error=False (an
        action that fails must not end the dashboard), so Textual alone would drop
        an error there: it is caught here, told and noted as an event instead,
        whether it came from acting or from reporting what was done."""

        def guarded() -> None:
            try:
                work()
            except Exception as exc:  # noqa: BLE001 - every failure is said, none is lost
                self.app.call_from_thread(self._failed, what, plans, exc)

        self.app.run_worker(guarded, thread=True, exit_on_error=False, **options)

    def _failed(self, what: str, plans: Sequence[Plan], exc: Exception) -> None:
        said = " ".join(f"{type(exc).__name__}: {exc}".split())
        detail = f"{what} failed inside lockwatch ({said})"
        if plans:
            # It may have been done (and audited) before the failure: never "nothing done".
            detail += "; whether it was done: see `lockwatch audit`"
        for plan in plans:
            self._note(EventKind.ACTION_FAILED, plan, detail)
        if not plans:
            now = self.app.clock.now()
            self.app.note(Event(now, EventKind.ACTION_FAILED, None, what, "lockwatch", detail))
        self.app.notify(
            markup=False,
            message=clean(detail),
            title=f"{what} failed",
            severity="error",
            timeout=15,
        )

    def _report(self, plans: list[Plan], outcomes: list[Outcome]) -> None:
        self.sync_held()
        for plan, outcome in zip(plans, outcomes, strict=True):
            # The operator's actions are events too, done or not.
            if outcome.ok:
                self._note(done_event(plan.kind), plan, outcome.message)
                self._into_history(plan, outcome)
            else:
                self._note(EventKind.ACTION_FAILED, plan, f"{plan.kind.value}: {outcome.message}")
        if len(outcomes) == 1:
            outcome = outcomes[0]
            self.app.notify(
                markup=False,
                message=clean(outcome.message),
                title="done" if outcome.ok else outcome.event.replace("_", " "),
                severity="information" if outcome.ok and outcome.audited else "error",
                timeout=10,
            )
            return
        failed = [o for o in outcomes if not o.ok]
        summary = f"{len(outcomes) - len(failed)} done, {len(failed)} refused or failed"
        detail = "\n".join(clean(o.message) for o in failed[:5])
        self.app.notify(
            markup=False,
            message=summary + ("\n" + detail if detail else ""),
            title="bulk break",
            severity="warning" if failed else "information",
            timeout=12,
        )

    def _into_history(self, plan: Plan, outcome: Outcome) -> None:
        """The action into the lock history, with its audit record's seq: what
        it ended says "broken by <operator> (audit #N)"."""
        history = self.app.history
        if history is None:
            return
        from lockwatch.model.blocking import node_of
        from lockwatch.model.history import ActionMark

        lock = plan.lock
        node = node_of(lock)
        history.action(
            ActionMark(
                self.app.host,
                self.app.clock.now(),
                lock.id,
                outcome.event,
                self.actions.operator.name,
                outcome.audit_seq,
                node=None if node is None else str(node),
            )
        )

    def _note(self, kind: str, plan: Plan, detail: str) -> None:
        lock = plan.lock
        self.app.note(Event(self.app.clock.now(), kind, lock.id, lock.name, lock.source, detail))

    def _refused(self, plan: Plan) -> None:
        assert plan.refusal is not None
        self.app.notify(
            markup=False,
            message=clean(plan.refusal[1]),
            title=f"cannot {plan.kind.value}",
            severity="error",
            timeout=8,
        )

    def _nothing_done(self) -> None:
        self._say("cancelled — nothing done")

    def _say(self, message: str, severity: SeverityLevel = "information") -> None:
        self.app.notify(markup=False, message=message, severity=severity, timeout=SAY_SECONDS)

    # -- the locks lockwatch holds -------------------------------------------------

    def sync_held(self) -> None:
        """Bring the ★ marks in line with what the action session holds."""
        held = self.actions.held_ids()
        if held != self.app.held:
            changed = held ^ self.app.held
            self.app.held.clear()
            self.app.held.update(held)
            self.app.show_rows(sorted(changed))

    def keep_holdings(self) -> None:
        """Once a second: heartbeat what is held when it is due, off the loop."""
        if self.actions.due(self.app.clock.now()):
            self._work(self._heartbeat, "heartbeat", exclusive=True, group="heartbeat")

    def _heartbeat(self) -> None:
        lost = self.actions.heartbeat(self.app.clock.now())
        self.app.call_from_thread(self._lost, lost)

    def _lost(self, lost: list[str]) -> None:
        self.sync_held()
        for message in lost:
            self.app.notify(
                markup=False, message=clean(message), title="lock lost", severity="error"
            )

    def quit(self) -> None:
        """Leave; with locks held, ask first whether to keep or release them."""
        if not self.actions.held_ids():
            self.app.exit()
            return

        def done(choice: str | None) -> None:
            if choice in ("keep", "release"):
                release = partial(self._release_and_quit, files=choice == "release")
                self._work(release, "releasing on quit", exclusive=True, group="actions")

        self.app.push_screen(QuitScreen(self.actions.held_names()), done)

    def _release_and_quit(self, files: bool) -> None:
        """Release what is held (`files`: lock files too; Postgres locks always, as
        they end with lockwatch's sessions), audited, then leave."""
        results = self.actions.release_all("released on quitting lockwatch", files=files)
        # Printed once the dashboard is gone: a release that was refused must not go unseen.
        said = "\n".join(clean(result) for result in results)
        self.app.call_from_thread(self.app.exit, message=Text(said) if said else None)

    def abandon(self, why: str) -> None:
        """The terminal went away: held locks stay as on a crash, audited as kept."""
        self.actions.abandon(f"lockwatch's terminal went away ({why})")
