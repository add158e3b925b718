"""What every run asks of the kernel source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from lockwatch.sources.declaring import Declaring
from lockwatch.sources.kernel import ids

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.sources.contract import Decorator


class KernelDeclared(Declaring):
    # Its config table is its name; asked by --kernel (or
    # kernel.enabled in the config); its ids are the registry's to recognise (its
    # locks are found through the files they are on: the file source's paths).
    name = "kernel"
    label = "kern"
    id_prefix = ids.KERNEL
    summary = "the kernel's file locks (/proc/locks): flock, POSIX and OFD, holders and waiters"
    # Releasing another process's kernel lock is impossible from outside: the
    # only action is to signal its holder.
    title = "kernel locks in"
    sees_waits = True
    asking = ("kernel",)
    messages = None

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


DECLARED = KernelDeclared()
