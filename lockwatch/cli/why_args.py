"""`lockwatch why`'s command line: its options, then any text at all.

What an operator pastes starts with whatever the tool printed: the mariadb
client boxes a failed statement in a line of dashes, a message may begin
`-h`. Only the options before the text are options; from the first word that
is none, the rest is the text, taken whole (as if `--` stood before it), so
click never reads a pasted line as an unknown option.
"""

from __future__ import annotations

from collections.abc import Sequence

import click


class TextAfterOptions(click.Command):
    """A command whose options come first and whose argument is the rest."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, split_text(self.get_params(ctx), args))


def split_text(params: Sequence[click.Parameter], args: list[str]) -> list[str]:
    """`args` with `--` put where the options end: before the first word that is
    no option of `params` (nor an option's value)."""
    takes: dict[str, int] = {}
    for param in params:
        if isinstance(param, click.Option):
            values = 0 if param.is_flag or param.count else param.nargs
            for name in (*param.opts, *param.secondary_opts):
                takes[name] = values
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            return args
        name, equals, _ = word.partition("=")
        if word.startswith("--") and equals and takes.get(name):
            index += 1  # --option=value
        elif word in takes:
            index += 1 + takes[word]
        else:
            break
    return [*args[:index], "--", *args[index:]]
