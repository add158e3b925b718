"""How the SCAN patterns are walked: one pass over the keyspace where one can do.

Each SCAN walks the whole keyspace, whatever its MATCH: three patterns are three
walks over a million keys. Patterns that share a literal run (the defaults
`lock:*`, `redlock:*` and `*lock` all contain `lock`) are walked once, with
MATCH `*<run>*`, and each key found is checked against the patterns here, with
Redis's own glob rules for `*` and `?`. Patterns with classes or escapes
(`[abc]`, `\\*`) are walked on their own, as given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from lockwatch.model.lazyre import lazy_compile

# A shorter shared run would match too much of an unrelated keyspace.
MIN_RUN = 3
_WILDCARDS = lazy_compile(r"[*?]")

Check = Callable[[bytes], bool]


def _simple(pattern: str) -> bool:
    return not any(char in pattern for char in "[]\\")


def _regex(pattern: str) -> re.Pattern[bytes]:
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(b".*")
        elif char == "?":
            parts.append(b".")
        else:
            parts.append(re.escape(char.encode("utf-8", "surrogateescape")))
    return re.compile(b"".join(parts), re.DOTALL)


def _shared_run(patterns: Sequence[str]) -> str | None:
    """The longest literal run (outside wildcards) every pattern contains."""
    pieces = [[piece for piece in _WILDCARDS.split(p) if piece] for p in patterns]
    first = pieces[0]
    candidates = sorted(
        {
            piece[start:end]
            for piece in first
            for start in range(len(piece))
            for end in range(start + MIN_RUN, len(piece) + 1)
        },
        key=lambda run: (-len(run), run),
    )
    for run in candidates:
        if all(any(run in piece for piece in others) for others in pieces[1:]):
            return run
    return None


def scan_plan(patterns: Sequence[str]) -> list[tuple[str, Check | None]]:
    """(MATCH pattern, check of each key found or None) per SCAN walk."""
    unique = list(dict.fromkeys(patterns))
    simple = [p for p in unique if _simple(p)]
    walks: list[tuple[str, Check | None]] = [(p, None) for p in unique if not _simple(p)]
    run = _shared_run(simple) if len(simple) > 1 else None
    if run is None:
        return [(p, None) for p in simple] + walks
    compiled = [_regex(p) for p in simple]

    def check(key: bytes) -> bool:
        return any(regex.fullmatch(key) for regex in compiled)

    return [(f"*{run}*", check), *walks]
