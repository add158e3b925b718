"""The cyclic garbage collector, held off while many small objects are made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection while the block runs.

    Making tens of thousands of small objects that all survive (a change set
    encoded or decoded, a scan's locks unpickled) sets off the collector every few
    hundred of them, and some of its passes walk the whole heap: more than double
    the time on a large board. Those objects hold no cycles, so this only defers
    collections: the next pass catches up. A collector someone else has turned off
    stays off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
