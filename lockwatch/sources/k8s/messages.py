"""What client-go's leader election logs about a Lease, and what to make of it
(`lockwatch why`). Pure: text in, clues out.

Its lines, from k8s.io/client-go/tools/leaderelection/leaderelection.go, name
the Lease as `namespace/name` (LeaseLock.Describe). Up to client-go 0.34
(Kubernetes 1.34) they are printf lines as klog writes them
(`I1207 14:49:03.123456   12345 leaderelection.go:250] ...`):

- `attempting to acquire leader lease kube-system/kube-scheduler...` (two spaces
  before the name in older releases)
- `failed to acquire lease kube-system/kube-scheduler` (another holds it, not expired)
- `lock is held by <holderIdentity> and has not yet expired` (names the holder
  only; `...: kube-system/kube-scheduler` in the coordinated path of 0.31-0.34)
- `failed to renew lease kube-system/kube-scheduler: timed out waiting for the
  condition` (or `context deadline exceeded`): the holder gave up leading
- `error retrieving resource lock kube-system/kube-scheduler: ...`
- `successfully acquired lease kube-system/kube-scheduler`

From 0.35 (Kubernetes 1.35) they are structured: the message, then the Lease as
the `lock` key, in klog's text form (`"Failed to acquire lease"
lock="kube-system/kube-scheduler"`) or its JSON form (`"msg":"Failed to acquire
lease",...,"lock":"kube-system/kube-scheduler"`): `Attempting to acquire leader
lease...`, `Failed to acquire lease`, `Lease is held by and has not yet expired`
(with `holder=`), `Failed to renew lease`, `error retrieving resource lock`,
`Error retrieving lease lock`, `Successfully acquired lease`.
"""

from __future__ import annotations

from lockwatch.model.clues import Clue, ClueKind
from lockwatch.model.lazyre import lazy_compile

SOURCE = "k8s"
TOOL = "client-go"

ACQUIRE_ADVICE = (
    "a candidate waits while another holds the Lease and has renewed it within"
    " leaseDurationSeconds of when the candidate last saw it change: if its holder is"
    " gone, the Lease lapses by itself after that; break it only if the holder will never"
    " return and waiting is too long"
)
RENEW_ADVICE = (
    "the holder could not renew within its renewDeadline (an API server too slow or"
    " unreachable from it, or its own process starved) and stopped leading; most"
    " components exit then and are restarted, and a candidate takes the Lease"
)
RETRIEVE_ADVICE = (
    "the candidate could not read the Lease at all: its RBAC (get/update leases in"
    " that namespace), or the API server, is at fault, not another holder"
)
# The Lease a line names: namespace/name, DNS labels and subdomains.
_NAME = r"(?P<lease>[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?)"
# A structured line's `lock` key, in klog's text form or its JSON form.
_LOCK_KEY = r'[^\n]*?(?:\block=|"lock":\s*)"' + _NAME + '"'
_LINES = (
    (lazy_compile(rf"attempting to acquire leader lease\s+{_NAME}"), ACQUIRE_ADVICE),
    (lazy_compile(rf"failed to acquire lease {_NAME}"), ACQUIRE_ADVICE),
    (lazy_compile(rf"lock is held by \S+ and has not yet expired: {_NAME}"), ACQUIRE_ADVICE),
    (lazy_compile(rf"failed to renew lease {_NAME}"), RENEW_ADVICE),
    (lazy_compile(rf"error retrieving resource lock {_NAME}"), RETRIEVE_ADVICE),
    (lazy_compile(rf"successfully (?:acquired|renewed) lease {_NAME}"), None),
    # client-go 0.35 on: the message quoted, the Lease its `lock` key.
    (
        lazy_compile(
            rf'"(?:Attempting to acquire leader lease\.\.\.|Failed to acquire lease'
            rf'|Lease is held by and has not yet expired)"{_LOCK_KEY}'
        ),
        ACQUIRE_ADVICE,
    ),
    (lazy_compile(rf'"Failed to renew lease"{_LOCK_KEY}'), RENEW_ADVICE),
    (
        lazy_compile(
            rf'"(?:error retrieving resource lock|Error retrieving lease lock)"{_LOCK_KEY}'
        ),
        RETRIEVE_ADVICE,
    ),
    (lazy_compile(rf'"Successfully (?:acquired|renewed) lease"{_LOCK_KEY}'), None),
)
# The printf line that names only the holder (client-go up to 0.34, at -v=4).
_HELD_BY = lazy_compile(r"lock is held by (?P<holder>[^\s:]+) and has not yet expired(?!: \S)")


def _clue(value: str, advice: str | None, what: str) -> Clue:
    return Clue(
        ClueKind.NAME,
        value,
        SOURCE,
        TOOL,
        advice,
        options=(("k8s", True),),
        detail=(("is", what),),
    )


def clues(text: str) -> list[Clue]:
    """A clue for each Lease client-go's lines in `text` name, once each, and for
    each holder a line names without its Lease."""
    found: dict[str, Clue] = {}
    for pattern, advice in _LINES:
        for match in pattern.finditer(text):
            lease = match["lease"]
            if lease not in found or (advice and not found[lease].advice):
                found[lease] = _clue(lease, advice, "lease")
    holders = {
        match["holder"]: _clue(match["holder"], ACQUIRE_ADVICE, "holder")
        for match in _HELD_BY.finditer(text)
    }
    return [*found.values(), *holders.values()]
