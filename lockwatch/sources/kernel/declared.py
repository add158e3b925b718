"""What every run asks of the kernel source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from lockwatch.sources.kernel import ids

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted


class KernelDeclared:
    name = "kernel"
    label = "kern"
    id_prefix = ids.KERNEL
    summary = "the kernel's file locks (/proc/locks): flock, POSIX and OFD, holders and waiters"
    config_tables: tuple[str, ...] = ("kernel",)
    # Releasing another process's kernel lock is impossible from outside: the
    # only action is to signal its holder.
    title = "kernel locks in"
    status_word = ""
    sees_waits = True
    wait_metrics: str | None = None

    def options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--kernel",
                is_flag=True,
                default=False,
                help="Also list every kernel file lock (/proc/locks: flock, POSIX, OFD) with its"
                " holder and waiters [config: kernel.enabled].",
            )
        ]

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        from lockwatch.model.action import Kind  # not at the top: `ls` never asks

        if kind is not Kind.BREAK:
            return ()
        return [
            click.option(
                "--signal",
                type=click.Choice(["TERM", "KILL"], case_sensitive=False),
                default=None,
                show_default="TERM",
                callback=lambda ctx, param, value: value.upper() if value else None,
                help="Kernel locks: the signal sent to every process holding the lock. TERM asks"
                " them to exit, and SIGKILL follows after --grace for those still holding it"
                " (unless --no-kill); KILL ends them at once, with no clean-up. A lock file a"
                " kernel lock is held on is broken this way only when --signal is given (it is"
                " never moved aside under its holder).",
            ),
            click.option(
                "--grace",
                type=click.FloatRange(min=0, max=3600),
                default=10.0,
                show_default=True,
                metavar="SECONDS",
                help="Kernel locks: how long the holders have after SIGTERM to let go of it.",
            ),
            click.option(
                "--kill/--no-kill",
                "kill",
                default=True,
                show_default=True,
                help="Kernel locks: SIGKILL the holders still holding it after --grace. With"
                " --no-kill, SIGTERM only: a lock still held then is a failure naming who holds"
                " it.",
            ),
        ]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return bool(values.get("kernel"))

    def clues(self, text: str) -> Sequence[Clue]:
        # Its ids are the registry's to recognise (kernel:...); its locks are found
        # through the files they are on (the file source's paths).
        return ()

    def may_run(self, wanted: Wanted) -> bool:
        # Asked by --kernel, or by kernel.enabled in the config.
        return self.asked(wanted.values) or wanted.settings(self.name) is not None


DECLARED = KernelDeclared()
