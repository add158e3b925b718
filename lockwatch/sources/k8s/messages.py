"""What client-go's leader election logs about a Lease, and what to make of it
(`lockwatch why`). Pure: text in, clues out.

Its lines, from k8s.io/client-go/tools/leaderelection/leaderelection.go as
klog writes them (`I1207 14:49:03.123456   12345 leaderelection.go:250] ...`),
name the Lease as `namespace/name` (LeaseLock.Describe):

- `attempting to acquire leader lease kube-system/kube-scheduler...`
- `failed to acquire lease kube-system/kube-scheduler` (another holds it, not expired)
- `failed to renew lease kube-system/kube-scheduler: timed out waiting for the
  condition` (or `context deadline exceeded`): the holder gave up leading
- `error retrieving resource lock kube-system/kube-scheduler: ...`
- `successfully acquired lease kube-system/kube-scheduler`
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
_LINES = (
    (lazy_compile(rf"attempting to acquire leader lease {_NAME}"), ACQUIRE_ADVICE),
    (lazy_compile(rf"failed to acquire lease {_NAME}"), ACQUIRE_ADVICE),
    (lazy_compile(rf"failed to renew lease {_NAME}"), RENEW_ADVICE),
    (lazy_compile(rf"error retrieving resource lock {_NAME}"), RETRIEVE_ADVICE),
    (lazy_compile(rf"successfully (?:acquired|renewed) lease {_NAME}"), None),
)


def clues(text: str) -> list[Clue]:
    """A clue for each Lease client-go's lines in `text` name, once each."""
    found: dict[str, Clue] = {}
    for pattern, advice in _LINES:
        for match in pattern.finditer(text):
            lease = match["lease"]
            if lease not in found or (advice and not found[lease].advice):
                found[lease] = Clue(
                    ClueKind.NAME,
                    lease,
                    SOURCE,
                    TOOL,
                    advice,
                    options=(("k8s", True),),
                    detail=(("is", "lease"),),
                )
    return list(found.values())
