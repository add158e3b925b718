"""lazy_compile (issue 42): a module's pattern is compiled when first used, not
at import, and then behaves as the compiled pattern does."""

from __future__ import annotations

import re

import pytest

from lockwatch.model.lazyre import lazy_compile


def test_nothing_is_compiled_until_the_pattern_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[object] = []
    real = re.compile

    def counting(source: str, flags: int = 0) -> re.Pattern[str]:
        compiled.append(source)
        return real(source, flags)

    monkeypatch.setattr(re, "compile", counting)
    pattern = lazy_compile(r"(?P<pid>\d+)\.lock", re.IGNORECASE)
    assert compiled == []
    match = pattern.fullmatch("42.LOCK")
    assert match is not None and match["pid"] == "42"
    assert pattern.sub("N", "1.lock 2.lock") == "N N"
    assert [m["pid"] for m in pattern.finditer("3.lock 4.lock")] == ["3", "4"]
    assert pattern.pattern == r"(?P<pid>\d+)\.lock" and pattern.flags & re.IGNORECASE
    assert compiled == [r"(?P<pid>\d+)\.lock"]  # once, at first use
    # Compiled, its look-ups are plain ones (no __getattr__ hook in the way).
    assert not hasattr(type(pattern), "__getattr__")
    assert repr(pattern) == "lazy_compile('(?P<pid>\\\\d+)\\\\.lock', re.IGNORECASE)"


def test_bytes_patterns_too() -> None:
    pattern = lazy_compile(rb"\s*([+-]?\d+)")
    match = pattern.match(b" 17 host")
    assert match is not None and match.group(1) == b"17"
