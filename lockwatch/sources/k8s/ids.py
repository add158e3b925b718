"""Kubernetes lock ids, built and parsed here and nowhere else:
`k8s:<host:port>:lease/<namespace>/<name>` for a Lease and
`k8s:<host:port>:candidate/<namespace>/<name>` for a LeaseCandidate.

The server is the API server's host:port as the kubeconfig (or the in-cluster
config) names it: the name an action's reach looks its connection up by.
"""

from __future__ import annotations

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.slots import lean_dataclass

K8S = "k8s"
LEASE = "lease"
CANDIDATE = "candidate"

_ID = lazy_compile(
    r"k8s:(?P<server>(?:\[[0-9A-Fa-f:.]+\]|[^:/\[\]]+):\d+):"
    r"(?P<kind>lease|candidate)/(?P<namespace>[^/]+)/(?P<name>[^/]+)"
)


@lean_dataclass(frozen=True, slots=True)
class K8sId:
    server: str
    kind: str  # LEASE or CANDIDATE
    namespace: str
    name: str


def k8s_id(server: str, kind: str, namespace: str, name: str) -> str:
    return f"{K8S}:{server}:{kind}/{namespace}/{name}"


def parse_k8s(lock_id: str) -> K8sId | None:
    match = _ID.fullmatch(lock_id)
    if match is None:
        return None
    return K8sId(match["server"], match["kind"], match["namespace"], match["name"])
