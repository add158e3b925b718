"""clawdbot's gateway lock: `gateway.<hash>.lock`.

Not written yet: claims nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lockwatch.model.handover import NewHolder
from lockwatch.model.lock import Lock, StalenessPolicy
from lockwatch.sources.files.decoders.base import LockFile

FORMAT = "clawdbot-gateway"
POLICY = StalenessPolicy()


def wants(path: str, kind: str) -> bool:
    """Names (beyond `*.lock`/`*.pid`) this tool gives its locks."""
    return False


def read(file: LockFile) -> Lock | None:
    """The lock, if `file` is one of this tool's; else None."""
    return None


def handover(content: Any, new: NewHolder) -> bytes | None:
    return None  # not stealable


def refresh(content: Any, at: datetime) -> bytes | None:
    return None
