"""How a server source's actions reach a server by the name a lock id carries:
the servers a run was told of (flags, config) by that name, else what the name
itself reads as. Loaded with a source's actions, never at the CLI's start."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from lockwatch.sources.contract import SourceError

EndpointT = TypeVar("EndpointT")


@dataclass(frozen=True)
class KnownServers(Generic[EndpointT]):
    """The servers a run was told of, by name; any other name is reached as
    `unknown` reads it (None: it names no server it could reach)."""

    known: Mapping[str, EndpointT]

    def __call__(self, name: str) -> EndpointT | None:
        known = self.known.get(name)
        if known is not None:
            return known
        try:
            return self.unknown(name)
        except SourceError:
            return None

    def unknown(self, name: str) -> EndpointT | None:
        """The server a name no flag nor config gave stands for (None, or a
        SourceError saying why: none)."""
        return None
