"""Breaking a beacon lease: a DELETE that names the fence seen (compare-and-swap
on the server), reaching the server as the run's options and config say."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lockwatch.model.action import (
    ActionFailed,
    ActionRefused,
    Asked,
    Doing,
    Done,
    Kind,
    Plan,
    refused,
)
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import ActionsBase, SourceError, Wanted

from .client import Unreachable, change, server_of
from .declared import NAME
from .facts import BeaconLease
from .settings import settings_of, urls_of

# The name its reach goes by in `Doing.reach`.
REACH = "beacon_servers"
# Where the token comes from when the config names no token_file.
TOKEN_VARIABLE = "BEACON_TOKEN"


@dataclass(frozen=True)
class Reach:
    """How this run reaches beacon servers: their URLs by name, and the token."""

    urls: Mapping[str, str]
    token: str | None

    def url_for(self, server: str) -> str:
        url = self.urls.get(server)
        if url is None:
            raise ActionRefused("no_dsn", f"no URL for {server}: name it with --beacon")
        return url


def token_of(wanted: Wanted) -> str | None:
    """The token a change needs: the config's token_file (read as every server
    source reads a password file: refused when others may read it), else
    BEACON_TOKEN; None: neither."""
    from lockwatch.sources.secrets import PasswordFileError, read_password_file

    path = settings_of(wanted).token_file
    if path is None:
        return wanted.environ.get(TOKEN_VARIABLE) or None
    try:
        return read_password_file(os.path.expanduser(path))
    except PasswordFileError as exc:
        # Its words name the key as the password file's: here it is the token's.
        raise SourceError(str(exc).replace("password_file", "beacon.token_file", 1)) from exc


def lease_of(lock: Lock) -> BeaconLease:
    lease = lock.facts
    assert isinstance(lease, BeaconLease), lock.id
    return lease


class BeaconActions(ActionsBase):
    name = NAME
    kinds: frozenset[Kind] = frozenset({Kind.BREAK})

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        urls = {server_of(url): url for url in urls_of(wanted)}
        return {REACH: Reach(urls, token_of(wanted))}

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        lease = lease_of(lock)
        if kind is not Kind.BREAK:
            return refused(kind, lock, verdict, "unsupported", "beacons can only be broken")
        effect = f"drop {lease.key} on {lease.server} if its fence is still {lease.fence}"
        needs_name = verdict.state is not State.STALE
        return Plan(kind, lock, verdict, "lock_broken", effect, needs_name=needs_name)

    def run(self, plan: Plan, doing: Doing) -> Done:
        lease = lease_of(plan.lock)
        status = self.send(doing, lease, "DELETE")
        if status != 204:
            raise ActionFailed("failed", f"{lease.server} answered {status}: state unknown")
        return Done({"fence": lease.fence}, f"dropped {lease.key} (fence {lease.fence})")

    def send(self, doing: Doing, lease: BeaconLease, method: str, tail: str = "") -> int:
        """`method` on `lease` at its server, if its fence is still the one seen:
        the server's status; refused (nothing touched) for another fence or token."""
        reach = doing.reach.get(REACH)
        if not isinstance(reach, Reach):
            raise ActionRefused("no_dsn", f"no URL for {lease.server}: name it with --beacon")
        url = reach.url_for(lease.server)
        if reach.token is None:
            why = f"no token for {lease.server}: beacon.token_file or {TOKEN_VARIABLE}"
            raise ActionRefused("no_token", why)
        try:
            status = change(url, method, lease.key, lease.fence, reach.token, tail)
        except Unreachable as exc:
            raise ActionFailed("unreachable", f"{exc}: whether it was done is unknown") from exc
        if status == 409:
            # Compare-and-swap: another holder (a new fence) is not the one seen.
            raise ActionRefused("changed", f"{lease.key} is no longer fence {lease.fence}")
        if status in (401, 403):
            raise ActionRefused("denied", f"{lease.server} refused the token")
        return status

    def target(self, lock: Lock) -> dict[str, Any]:
        lease = lease_of(lock)
        return {"server": lease.server, "key": lease.key, "fence": lease.fence}


ACTIONS = BeaconActions()
