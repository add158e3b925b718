"""The roots a running feed reads, held to where they led when it started.

A root named on the command line may be a symlink (`/srv/locks -> /data/locks`):
the operator named it, so it is followed. But a root that becomes a symlink
while lockwatch runs (`mv d d.old && ln -s / d`), or a named link pointed
elsewhere, is not the place the operator chose: followed, it walked and watched
the whole filesystem. Each pass checks first where every root leads now; one
that leads elsewhere is reported and not read, until it leads back (`rm -rf d
&& mkdir d` leads back: the same path, a new directory).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from lockwatch.model.status import ScanError, SourceStatus

if TYPE_CHECKING:
    from datetime import datetime

MOVED = "root_moved"
# The header's word for a tree whose directories are still being watched one by
# one (seconds on a large tree; out of watches, it turns to polling).
ARMING = "arming watches"


class PinnedRoots:
    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = list(roots)
        self._real = {root: os.path.realpath(root) for root in self.roots}

    def moved(self, root: str) -> ScanError | None:
        """Why `root` is not to be read now, or None when it leads where it did."""
        was = self._real.get(root)
        if was is None:
            return None
        now = os.path.realpath(root)
        if now == was:
            return None
        how = "replaced by a symlink" if os.path.islink(root) else "moved"
        return ScanError(
            path=root,
            code=MOVED,
            message=(
                f"{how}: it leads to {now}, not to {was} as when lockwatch started;"
                " not followed (start lockwatch again to follow it)"
            ),
        )

    def usable(self) -> tuple[list[str], list[ScanError]]:
        """The roots to read now, and why each of the others is not read."""
        kept: list[str] = []
        errors: list[ScanError] = []
        for root in self.roots:
            error = self.moved(root)
            if error is None:
                kept.append(root)
            else:
                errors.append(error)
        return kept, errors


def root_statuses(
    roots: Sequence[str],
    errors: Mapping[str, ScanError],
    polling: str | None,
    arming: bool,
    at: datetime,
) -> tuple[SourceStatus, ...]:
    """What the header says of each root: an error (`errors`: the last pass's, by
    root), polled (and why), watched, or still arming its watches."""
    out = []
    for root in roots:
        error = errors.get(root)
        if error is not None and error.code == "not_found":
            out.append(SourceStatus("file", root, "error", reason="does not exist"))
        elif error is not None:
            out.append(SourceStatus("file", root, "error", reason=error.message))
        elif not os.path.exists(root):
            out.append(SourceStatus("file", root, "error", reason="does not exist"))
        elif polling is not None:
            out.append(SourceStatus("file", root, "polling", reason=polling, updated_at=at))
        elif arming:
            out.append(SourceStatus("file", root, "watching", reason=ARMING, updated_at=at))
        else:
            out.append(SourceStatus("file", root, "watching", updated_at=at))
    return tuple(out)
