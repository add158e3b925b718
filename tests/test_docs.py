"""The README is the front door and docs/ the reference: every relative link in
them leads somewhere (a file that exists, a heading that is there), every docs
page is reachable from the README, and the README's first block is the two
commands a fresh machine runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside code: a `[x](y)` or a `# line` in a code block is not markdown."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link targets kept, markup and punctuation dropped,
    lower case, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        if match := re.match(r"^#{1,6} (.+?)\s*#*$", line):
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    text = CODE_SPAN.sub("", prose(path.read_text(encoding="utf-8")))
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def test_slug_is_githubs() -> None:
    assert slug("The kernel's locks: `/proc/locks`") == "the-kernels-locks-proclocks"
    assert slug("The dashboard: `lockwatch [PATH]... [--pg DSN]...`") == (
        "the-dashboard-lockwatch-path---pg-dsn"
    )
    assert slug("States, and what to do about each") == "states-and-what-to-do-about-each"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken: list[str] = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")
    assert not broken, f"{page.name}: {broken}"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve() for target in relative_links(ROOT / "README.md")
    }
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_the_readme_opens_with_the_two_commands() -> None:
    """A newcomer copies the first block: install and demo, install and test."""
    first = re.search(r"^```sh\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    assert first is not None
    assert first.group(1).splitlines() == [
        "python3 -m venv .venv && .venv/bin/pip install -c constraints.txt '.[demo]'"
        " && .venv/bin/lockwatch demo",
        "python3 -m venv .venv && .venv/bin/pip install -c constraints.txt '.[test]'"
        " && .venv/bin/python -m pytest",
    ]
