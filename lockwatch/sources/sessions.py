"""What the database sources' rules (PostgreSQL, MySQL) say alike about a
session's client process on this host: gone while its session holds on, or
alive while its session sits idle past the limit."""

from __future__ import annotations

from lockwatch.model.lock import Reason
from lockwatch.model.verdict import State, Verdict


def client_gone(client: str, state: str, holder: str, ends: str) -> Reason:
    """The client process `client` is gone while `holder` (its server-side
    session) holds on; `ends`: what would release its locks, besides the server
    noticing. `state`: the session's state, in words, or ""."""
    state = f" (the session is {state})" if state else ""
    return Reason(
        "client_dead",
        f"its client process {client} is gone, yet its {holder} holds on{state}:"
        f" nothing will release {ends}",
    )


def idle_client_alive(
    code: str, idle: str, client: str, info: list[Reason], age: float | None, alive: bool | None
) -> Verdict:
    """Idle past the limit (`code`, `idle`: how), yet its client process
    `client` on this host is alive: active, not stale."""
    return Verdict(
        State.ACTIVE,
        (
            Reason(code, f"{idle}; not stale: its client process is alive"),
            Reason(
                "client_alive",
                f"its client process {client} on this host is alive: it may be at work"
                " elsewhere (a lock held on a dedicated connection sits idle while its"
                " program works)",
            ),
            *info,
        ),
        age_seconds=age,
        alive=alive,
    )
