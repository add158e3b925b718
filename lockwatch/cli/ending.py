"""How one-shot commands end."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

# Set only by the console script, never under a test runner that shares the process.
FAST_EXIT = False


def finish(code: int) -> NoReturn:
    """End a one-shot command. From the console script, flush and leave without
    tearing down the heap (tens of thousands of records take longer to free than
    the command took to run); anywhere else, exit the ordinary way."""
    if FAST_EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def fail(message: str, code: int) -> NoReturn:
    """End a command with one line on stderr (no traceback) and exit `code`;
    `message` may carry others' text (a path): made printable first."""
    import click

    from lockwatch.cli.table import printable

    click.echo(f"lockwatch: {printable(message)}", err=True)
    sys.exit(code)
