"""The Kubernetes API, as much of it as Leases need, with plain httpx.

Why not the official `kubernetes` client: it imports ~200 modules (its models)
at start, brings its own urllib3 pool with per-request timeouts but no deadline
for a whole answer, and a list of its objects is parsed twice over. A list and a
merge patch are two HTTP requests of JSON; httpx is already lockwatch's HTTP
client, and `sources/deadline.py` bounds every read of a poll by its deadline.

Every answer is read bounded (`sources/bounded.py`) before it is parsed, and a
list follows `continue` for at most MAX_PAGES pages of PAGE items.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import orjson

from lockwatch.sources.k8s.kubeconfig import Cluster

if TYPE_CHECKING:
    import httpx

MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_ANSWER_VALUES = 2_000_000
PAGE = 500
MAX_PAGES = 20  # 10,000 objects of a kind: past that the status says the list is cut

LEASES = "leases.coordination.k8s.io"
CANDIDATES = "leasecandidates.coordination.k8s.io"
PODS = "pods"
# LeaseCandidate's versions, newest first: v1beta1 since Kubernetes 1.33, v1alpha2 1.32
# (v1alpha1, 1.31, had another shape and is not read).
CANDIDATE_VERSIONS = ("v1beta1", "v1alpha2")


class ApiError(Exception):
    """The API server answered with an error (its Status message), or not as one."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Forbidden(ApiError):
    """RBAC denies a verb on a resource: what is missing, in kubectl's words."""

    def __init__(self, verb: str, resource: str, namespace: str | None) -> None:
        scope = f"in namespace {namespace}" if namespace else "at cluster scope"
        super().__init__(403, f"forbidden: {verb} {resource} {scope}")
        self.verb, self.resource, self.namespace = verb, resource, namespace

    @property
    def missing(self) -> str:
        """The permission to grant, as `kubectl auth can-i` takes it."""
        where = f" -n {self.namespace}" if self.namespace else " --all-namespaces"
        return f"{self.verb} {self.resource}{where}"


@dataclass(frozen=True)
class Listed:
    items: list[dict[str, Any]]
    resource_version: str
    cut: bool  # more than MAX_PAGES pages: only the first are here
    server_time: datetime | None  # the API server's clock (its Date header)


def path_for(
    group_version: str, resource: str, namespace: str | None, name: str | None = None
) -> str:
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    where = f"/namespaces/{namespace}" if namespace else ""
    tail = f"/{name}" if name else ""
    return f"{root}{where}/{resource}{tail}"


class Api:
    """One API server on one kept-alive connection."""

    def __init__(
        self,
        cluster: Cluster,
        timeout: float = 2.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        self.cluster = cluster
        self._client = httpx.Client(
            base_url=cluster.base,
            timeout=timeout,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            headers={
                "User-Agent": "lockwatch",
                "Accept": "application/json",
                "Accept-Encoding": "gzip",
            },
            transport=transport,
            verify=cluster.ssl_context() or True,
        )
        sni = cluster.tls_server_name
        self._extensions: dict[str, Any] = {"sni_hostname": sni} if sni else {}

    def close(self) -> None:
        self._client.close()

    def _body(self, response: httpx.Response, path: str) -> bytearray:
        """The answer's body, decoded a piece at a time within the caps."""
        from lockwatch.sources.bounded import Budget, answer_body

        budget = Budget(MAX_ANSWER_BYTES, MAX_ANSWER_VALUES)
        # Status 0: no status of the server's, for the answer was not read.
        return answer_body(response, path, budget, lambda message: ApiError(0, message))

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> tuple[int, dict[str, Any], datetime | None]:
        """(HTTP status, the JSON object answered, the server's Date) of one request.
        Every status the API server answers is returned; what is not JSON raises."""
        headers = self.cluster.headers()
        if content_type:
            headers["Content-Type"] = content_type
        request = self._client.build_request(
            method, path, params=params, content=body, headers=headers, extensions=self._extensions
        )
        response = self._client.send(request, stream=True)
        try:
            content = self._body(response, path)
            status, date = response.status_code, response.headers.get("date")
        finally:
            response.close()
        try:
            answer = orjson.loads(content) if content else {}
        except ValueError:
            raise ApiError(status, f"HTTP {status} from {path}: not the Kubernetes API") from None
        if not isinstance(answer, dict):
            raise ApiError(status, f"HTTP {status} from {path}: not the Kubernetes API")
        return status, answer, _date(date)

    def list(
        self, group_version: str, resource: str, namespace: str | None, full: str
    ) -> Listed | None:
        """Every object of `resource` (in `namespace`, or all); None when the server
        has no such resource (404). `full`: the resource's full name, for a 403."""
        path = path_for(group_version, resource, namespace)
        items: list[dict[str, Any]] = []
        token, version, when = "", "", None
        for _ in range(MAX_PAGES):
            params = {"limit": str(PAGE)}
            if token:
                params["continue"] = token
            status, answer, when = self.request("GET", path, params=params)
            if (status == 404 and answer.get("kind") != "Status") or (status == 404 and not items):
                return None
            _raise_for(status, answer, "list", full, namespace)
            found = answer.get("items") or []
            if not isinstance(found, list):
                raise ApiError(status, f"{path}: items is not a list")
            items.extend(item for item in found if isinstance(item, dict))
            meta = answer.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            token = str(meta.get("continue") or "")
            if not token:
                return Listed(items, version, False, when)
        return Listed(items, version, True, when)

    def get(
        self, group_version: str, resource: str, namespace: str, name: str, full: str
    ) -> dict[str, Any] | None:
        """One object; None when it is not there (404)."""
        status, answer, _ = self.request("GET", path_for(group_version, resource, namespace, name))
        if status == 404:
            return None
        _raise_for(status, answer, "get", full, namespace)
        return answer

    def merge_patch(
        self,
        group_version: str,
        resource: str,
        namespace: str,
        name: str,
        patch: dict[str, Any],
        full: str,
    ) -> tuple[int, dict[str, Any]]:
        """A JSON merge patch (its metadata.resourceVersion makes it a
        compare-and-swap: 409 Conflict when the object has another). (status, answer)
        for 200, 404 and 409; other errors raise."""
        path = path_for(group_version, resource, namespace, name)
        status, answer, _ = self.request(
            "PATCH", path, body=orjson.dumps(patch), content_type="application/merge-patch+json"
        )
        if status in (404, 409):
            return status, answer
        _raise_for(status, answer, "patch", full, namespace)
        return status, answer


def _raise_for(
    status: int, answer: dict[str, Any], verb: str, resource: str, namespace: str | None
) -> None:
    if status < 300:
        return
    if status == 403:
        raise Forbidden(verb, resource, namespace)
    message = answer.get("message") if isinstance(answer.get("message"), str) else None
    if status == 401:
        message = "unauthorized: the API server refused the credentials (expired token?)"
    raise ApiError(status, message or f"HTTP {status}")


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    # HTTP dates are GMT, which the email parser leaves naive.
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def parse_time(value: Any) -> datetime | None:
    """A MicroTime or Time (RFC 3339, `2024-01-02T03:04:05.123456Z`) as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
