"""Which tools' formats an entry is offered to: those whose CLAIMS (base.Claims,
declared in each format's module) it meets, in the order given.

A scan reads thousands of files, and most formats claim only a name or two:
asking all of them about each file was a quarter of a scan. The table is built
once from the declarations; an entry costs a few dictionary look-ups (its name,
its name's last four and first two characters, its first byte).
A module that declares nothing is offered every entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

from lockwatch.sources.files.decoders.base import Claims, LockFile

KINDS = ("file", "symlink", "dir")
_EVERYTHING = Claims(kinds=KINDS, anything=True)


# Endings are looked up by a name's last _TAIL characters (and beginnings by its
# first _HEAD), then checked whole: one look-up whatever the number declared.
_TAIL = 4
_HEAD = 2


class _Table:
    """One kind of entry's look-ups: each gives a bit mask over the modules."""

    def __init__(self) -> None:
        self.always = 0
        self.names: dict[str, int] = {}
        self.tails: dict[str, list[tuple[str, int]]] = {}
        self.heads: dict[str, list[tuple[str, int]]] = {}
        self.leading = [0] * 256

    def add(self, bit: int, claims: Claims) -> None:
        if claims.anything:
            self.always |= bit
        for name in claims.names:
            self.names[name] = self.names.get(name, 0) | bit
        for suffix in claims.suffixes:
            if len(suffix) < _TAIL:  # too short to look up: offered everything
                self.always |= bit
            else:
                self.tails.setdefault(suffix[-_TAIL:], []).append((suffix, bit))
        for prefix in claims.prefixes:
            if len(prefix) < _HEAD:  # too short to look up: offered everything
                self.always |= bit
            else:
                self.heads.setdefault(prefix[:_HEAD], []).append((prefix, bit))
        for byte in claims.leading:
            self.leading[byte] |= bit

    def mask(self, name: str, raw: bytes) -> int:
        mask = self.always | self.names.get(name, 0)
        for suffix, bit in self.tails.get(name[-_TAIL:], ()):
            if name.endswith(suffix):
                mask |= bit
        for prefix, bit in self.heads.get(name[:_HEAD], ()):
            if name.startswith(prefix):
                mask |= bit
        if raw:
            mask |= self.leading[raw[0]]
        return mask


class Dispatch:
    def __init__(self, modules: Sequence[ModuleType]) -> None:
        self._modules = tuple(modules)
        self._tables = {kind: _Table() for kind in KINDS}
        for index, module in enumerate(self._modules):
            claims: Claims = getattr(module, "CLAIMS", _EVERYTHING)
            for kind in claims.kinds:
                self._tables.setdefault(kind, _Table()).add(1 << index, claims)
        # Mask -> its modules in order: a tree's files share a handful of masks.
        self._offered: dict[int, tuple[ModuleType, ...]] = {}

    def offered(self, file: LockFile) -> tuple[ModuleType, ...]:
        """The modules that may claim `file`, in the order given."""
        table = self._tables.get(file.kind)
        if table is None:
            return self._modules
        mask = table.mask(file.name, file.raw)
        modules = self._offered.get(mask)
        if modules is None:
            modules = self._offered[mask] = tuple(
                module for index, module in enumerate(self._modules) if mask >> index & 1
            )
        return modules
