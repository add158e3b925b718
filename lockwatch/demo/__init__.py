"""`lockwatch demo`: a temporary workspace where real processes take, hold, lose and
fight over locks the way the seed systems do, plus PostgreSQL contention, for the
dashboard to show (see director.py for the whole show, cast.py for who is in it).

Children run `python -m lockwatch.demo.children` and import this package first: it
stays light, and `Demo` is imported only when asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lockwatch.demo.director import Demo, DemoError, PgInfo
    from lockwatch.demo.postgres import PgSetupError

__all__ = ["Demo", "DemoError", "PgInfo", "PgSetupError"]


def __getattr__(name: str) -> Any:
    if name == "PgSetupError":
        from lockwatch.demo import postgres

        return postgres.PgSetupError
    if name in __all__:
        from lockwatch.demo import director

        return getattr(director, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
