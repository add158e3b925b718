"""Regular expressions compiled on first use, not at import.

A command's start-up is mostly imports, and compiling every module's patterns
there cost ~9 % of a `ls --pg` run (issue 42) for patterns most runs never use
(`why`'s messages, other sources' ids). `lazy_compile` stands in for
`re.compile` at module level: the pattern is compiled the first time it is
used, and from then on its methods are the compiled pattern's own.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast

# What a compiled pattern offers; each is bound once the pattern is compiled, so
# a later `PATTERN.match(...)` costs one attribute look-up, as a Pattern's does.
_ATTRIBUTES = (
    "match",
    "fullmatch",
    "search",
    "sub",
    "subn",
    "split",
    "findall",
    "finditer",
    "scanner",
    "pattern",
    "flags",
    "groups",
    "groupindex",
)


class _Pattern:
    def __init__(self, source: str | bytes, flags: int) -> None:
        self._source = source
        self._flags = flags

    def __repr__(self) -> str:
        return f"lazy_compile({self._source!r}, {self._flags!r})"


class _Later(_Pattern):
    """A pattern not compiled yet. Two threads using it first both compile it:
    the same pattern, so either result will do (no lock needed)."""

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(self._source, self._flags)
        for attribute in _ATTRIBUTES:
            self.__dict__[attribute] = getattr(compiled, attribute)
        # A class with __getattr__ makes every look-up a slower one, even of what
        # its instance holds (~900 instructions, where a scan asks a few per file):
        # compiled, it becomes a plain holder of what it bound.
        self.__class__ = _Compiled  # type: ignore[assignment]
        return getattr(compiled, name)


class _Compiled(_Pattern):
    """A pattern compiled: the compiled one's methods and attributes in its dict."""


def lazy_compile(source: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """`re.compile(source, flags)`, done when the pattern is first used. (It is
    typed as the Pattern it becomes; `re.sub(it, ...)` would not take it: call
    its own methods.)"""
    return cast("re.Pattern[AnyStr]", _Later(source, flags))
