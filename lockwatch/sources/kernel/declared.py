"""What every run asks of the kernel source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from lockwatch.sources.kernel import ids

if TYPE_CHECKING:
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
