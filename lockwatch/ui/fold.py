"""Text folded onto lines at its natural breaks, for what an operator reads
before acting: paths break after a `/`, other text at spaces, and a word is cut
only when not even one of its parts fits the width.

Rich folds a long word wherever the line ends (`/run/.lockwatch-bro` | `ken/…`),
which makes a path in an effect read as another path. Here the width is the
one the renderable is given, so the same text folds right at 80 columns and
at 160.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from lockwatch.ui.safe import clean

# The narrowest a table may squeeze it to.
MIN_WIDTH = 12
_WORDS = re.compile(r"\S+\s*")
# Where a word too long for a line may break, best first: after a path's
# separator, then after punctuation inside a name.
_BREAKS = (re.compile(r"[^/]*/+|[^/]+"), re.compile(r"[^-_.,:;=@]*[-_.,:;=@]+|[^-_.,:;=@]+"))


def _parts(word: str, width: int, level: int = 0) -> Iterator[str]:
    """`word` in pieces no wider than `width`: at its best breaks that fit,
    by cells only where nothing else does."""
    if cell_len(word) <= width:
        yield word
        return
    if level < len(_BREAKS):
        pieces = _BREAKS[level].findall(word)
        if len(pieces) > 1:
            for piece in pieces:
                yield from _parts(piece, width, level + 1)
            return
        yield from _parts(word, width, level + 1)
        return
    yield from chop_cells(word, width)


def fold_lines(text: str, width: int) -> list[str]:
    """`text` as lines of at most `width` cells, broken at spaces, then after
    path separators, never in the middle of a word that fits a line of its own."""
    width = max(1, width)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for token in _WORDS.findall(paragraph) or [""]:
            word = token.rstrip()
            gap = token[len(word) :]
            if cell_len(line + word) <= width:
                line += token
                continue
            if cell_len(word) <= width:
                # It fits a line of its own: it moves there whole.
                if line.strip():
                    lines.append(line.rstrip())
                line = token
                continue
            # Longer than any line: its pieces fill lines greedily from here, so a
            # path breaks only after a `/`.
            for piece in _parts(word, width):
                if line.strip() and cell_len(line + piece) > width:
                    lines.append(line.rstrip())
                    line = ""
                line += piece
            line += gap
        lines.append(line.rstrip())
    return lines


def cut(text: Text, width: int, joint: str = " · ") -> Text:
    """`text` (one line) cut to `width` cells where it is wider, never mid-word
    while a word fits: where `fold_lines` would end its first line, with `…` for
    what is left out; or right after a whole part (parts are joined by `joint`)
    where that keeps as much, the `…` then only where there is room. Its styles kept."""
    if width <= 0 or text.cell_len <= width:
        return text
    plain = text.plain
    first = fold_lines(plain, width - 1)[0].rstrip(" ·(")
    at = plain.rfind(joint, 0, width + len(joint))
    if at >= len(first):
        kept = text[:at]
        if kept.cell_len + 2 <= width:
            kept.append(" …")
        return kept
    kept = text[: len(first)]
    kept.append("…")
    return kept


class Folded:
    """A Rich renderable of `text`, cleaned, folded by `fold_lines` to the width
    it is given; `lead`, styled `lead_style`, starts its first line."""

    def __init__(self, text: str, style: str = "", lead: str = "", lead_style: str = "bold"):
        self.text = clean(text, keep_newlines=True)
        self.style = style
        self.lead = lead
        self.lead_style = lead_style

    def lines(self, width: int) -> list[str]:
        return fold_lines(self.lead + self.text, width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = self.lines(options.max_width)
        body = Text("\n".join(lines), style=self.style, no_wrap=True)
        if self.lead:
            body.stylize(self.lead_style, 0, len(self.lead))
        yield body

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        whole = max((cell_len(line) for line in (self.lead + self.text).split("\n")), default=0)
        # It folds down to any width: a table may give it what is left.
        return Measurement(min(whole, MIN_WIDTH), min(whole, options.max_width))
