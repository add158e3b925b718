"""What the dashboard drives besides its feeds: a `--record` recorder and a
replay's controls (kept apart from ui/app.py, which imports them)."""

from __future__ import annotations

from typing import Protocol

from lockwatch.model.changes import ChangeSet


class Recorder(Protocol):
    # Why the recording stopped (a full disk, a change set it cannot write); None
    # while it goes on.
    failed: str | None

    def write(self, change: ChangeSet) -> None: ...

    def close(self) -> None: ...


class ReplayControl(Protocol):
    """What the replay keys drive (see sources/recording.py)."""

    @property
    def paused(self) -> bool: ...

    @property
    def speed(self) -> float: ...

    def toggle_pause(self) -> None: ...

    def step(self) -> None: ...

    def faster(self) -> None: ...

    def slower(self) -> None: ...

    def describe(self) -> str: ...
