"""A small Kubernetes API server for the k8s source's tests: no kube-apiserver
installs on these machines, so this imitation stands in for one. It is a real
HTTP server (optionally TLS) on a free loopback port, and speaks the part of the
API the source uses as the published OpenAPI schema (coordination.k8s.io/v1
Lease, v1beta1 LeaseCandidate, core/v1 Pod, meta/v1 Status and List) and the
API conventions say:

- list (all namespaces or one) with `limit` and `continue`, the list's
  `metadata.resourceVersion`, items without kind/apiVersion, as the real server
  answers; get; watch (`?watch=true&resourceVersion=N`: the events after N, one
  JSON object a line, then the stream ends at once (the real server holds it
  open for new events until `timeoutSeconds`: nothing here waits));
- JSON merge patch (`application/merge-patch+json`) and update (PUT), each with
  optimistic concurrency: a `metadata.resourceVersion` other than the object's
  is 409 Conflict with the real server's Status message, nothing written;
- every write bumps one cluster-wide resourceVersion counter;
- bearer-token authentication (401) and RBAC denials (403) with the real
  server's Status wording; a `Date` header from an injectable clock;
- discovery (`/api`, `/apis`, and each group version's APIResourceList, as the
  legacy discovery documents are), so kubectl's own `get leases` reads it;
- `stall`: accept connections and never answer (a server that stops answering).

Lease and LeaseCandidate specs are checked against their published schema
(SPECS: io.k8s.api.coordination.v1.LeaseSpec and v1beta1.LeaseCandidateSpec,
fields, types and required ones): a test that builds an object the real server
would refuse fails there, and a write's unknown field is dropped with a
`Warning` header as the server's default field validation does (`?fieldValidation
=Strict`: 400). Pods carry only `status.phase` and its kin, unchecked.

It is an imitation, said so wherever it is used: the real server's admission,
its other validation and server-side apply are not here.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GROUPS = {
    "leases": ("coordination.k8s.io", "v1", "Lease"),
    "leasecandidates": ("coordination.k8s.io", "v1beta1", "LeaseCandidate"),
    "pods": ("", "v1", "Pod"),
}


# The published schema's spec of each kind the fake checks: field -> type, and the
# fields it requires (LeaseCandidateSpec v1beta1: leaseName, binaryVersion, strategy).
SPECS: dict[str, tuple[dict[str, type], frozenset[str]]] = {
    "leases": (
        {
            "holderIdentity": str,
            "leaseDurationSeconds": int,
            "acquireTime": str,  # MicroTime
            "renewTime": str,  # MicroTime
            "leaseTransitions": int,
            "strategy": str,
            "preferredHolder": str,
        },
        frozenset(),
    ),
    "leasecandidates": (
        {
            "leaseName": str,
            "pingTime": str,  # MicroTime
            "renewTime": str,  # MicroTime
            "binaryVersion": str,
            "emulationVersion": str,
            "strategy": str,
        },
        frozenset({"leaseName", "binaryVersion", "strategy"}),
    ),
}


def spec_problems(resource: str, spec: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(unknown fields, errors) of `spec` against its kind's published schema."""
    if resource not in SPECS:
        return [], []
    fields, required = SPECS[resource]
    unknown = [f"spec.{key}" for key in spec if key not in fields]
    errors = [
        f"spec.{key}: must be {fields[key].__name__}"
        for key, value in spec.items()
        if key in fields and not (isinstance(value, fields[key]) and not isinstance(value, bool))
    ]
    errors += [f"spec.{key}: Required value" for key in sorted(required - set(spec))]
    return unknown, errors


# The key an answer's Warning headers travel under from route() to the handler.
WARNINGS = "__warnings__"

# Each resource's discovery entry (APIResource), as the real server lists it.
RESOURCES: dict[str, dict[str, Any]] = {
    "leases": {
        "singularName": "lease",
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
    },
    "leasecandidates": {
        "singularName": "leasecandidate",
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
    },
    "pods": {
        "singularName": "pod",
        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        "shortNames": ["po"],
        "categories": ["all"],
    },
}


def micro(at: datetime) -> str:
    """A MicroTime as the API server writes it."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def status(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details or {},
        "code": code,
    }


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


class FakeApi:
    def __init__(self, token: str | None = None, tls: tuple[str, str] | None = None) -> None:
        self.token = token
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (resource, ns, name)
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []  # (rv, type, resource, obj)
        self.version = 100
        self.denied: set[tuple[str, str, str | None]] = set()  # (verb, resource, ns | None)
        self.served = {"leases", "leasecandidates", "pods"}
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.stall = threading.Event()
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.scheme = "https" if tls else "http"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def name(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.stall.clear()
        self._server.shutdown()
        self._server.server_close()

    # -- the cluster's state, as a controller would write it --------------------------

    def put(
        self, resource: str, namespace: str, name: str, spec: dict[str, Any], **meta: Any
    ) -> dict[str, Any]:
        unknown, errors = spec_problems(resource, spec)
        if unknown or errors:  # a test's object the real server would refuse
            raise ValueError(f"{resource} {namespace}/{name}: {unknown + errors}")
        with self.lock:
            return self._write(resource, namespace, name, spec, meta)

    def _write(
        self, resource: str, namespace: str, name: str, spec: dict[str, Any], meta: dict[str, Any]
    ) -> dict[str, Any]:
        group, version, kind = GROUPS[resource]
        self.version += 1
        key = (resource, namespace, name)
        old = self.objects.get(key)
        body: dict[str, Any] = {
            "kind": kind,
            "apiVersion": f"{group}/{version}" if group else version,
            "metadata": {
                **(old["metadata"] if old else {}),
                "name": name,
                "namespace": namespace,
                "uid": (old or {}).get("metadata", {}).get("uid") or f"uid-{self.version}",
                "resourceVersion": str(self.version),
                "creationTimestamp": (old or {}).get("metadata", {}).get("creationTimestamp")
                or self.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
                **meta,
            },
        }
        if resource == "pods":
            body["status"] = spec
        else:
            body["spec"] = spec
        self.objects[key] = body
        self.events.append((self.version, "MODIFIED" if old else "ADDED", resource, body))
        return body

    def delete(self, resource: str, namespace: str, name: str) -> None:
        with self.lock:
            body = self.objects.pop((resource, namespace, name))
            self.version += 1
            self.events.append((self.version, "DELETED", resource, body))

    def spec(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self.objects[("leases", namespace, name)]["spec"])

    def deny(self, verb: str, resource: str, namespace: str | None = None) -> None:
        self.denied.add((verb, resource, namespace))

    # -- HTTP ------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, code: int, body: dict[str, Any]) -> None:
                warnings = body.pop(WARNINGS, ())
                data = json.dumps(body).encode()
                self.send_response(code)
                for warning in warnings:  # as the server's field validation warns
                    quoted = warning.replace("\\", "\\\\").replace('"', '\\"')
                    self.send_header("Warning", f'299 - "{quoted}"')
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Date", format_datetime(api.now().astimezone(UTC), usegmt=True))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self, method: str) -> None:
                api.requests.append((method, self.path))
                if api.stall.is_set():
                    while api.stall.is_set():
                        threading.Event().wait(0.05)
                    self.close_connection = True
                    return
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if api.token and self.headers.get("Authorization") != f"Bearer {api.token}":
                    self._send(401, status(401, "Unauthorized", "Unauthorized"))
                    return
                code, body = api.route(method, self.path, raw, self.headers.get("Content-Type"))
                if code == 0:
                    self._watch(body)
                    return
                self._send(code, body)

            def _watch(self, body: dict[str, Any]) -> None:
                lines = b"".join(json.dumps(event).encode() + b"\n" for event in body["events"])
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(lines)))
                self.end_headers()
                self.wfile.write(lines)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def do_PUT(self) -> None:
                self._serve("PUT")

        return Handler

    def discovery(self, segments: list[str]) -> dict[str, Any] | None:
        """The legacy discovery document at `segments`, or None (not discovery)."""
        served = sorted(self.served)
        if segments == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        # v1 first: the group's preferred version (and GA before beta).
        versions = sorted({GROUPS[r][1] for r in served if GROUPS[r][0]}, key=lambda v: v != "v1")
        if segments == ["apis"]:
            group = "coordination.k8s.io"
            listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            groups = [{"name": group, "versions": listed, "preferredVersion": listed[0]}]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups if listed else []}
        if segments == ["api", "v1"]:
            wanted = ""
        elif len(segments) == 3 and segments[0] == "apis":
            wanted = f"{segments[1]}/{segments[2]}"
        else:
            return None
        resources = [
            {"name": r, "namespaced": True, "kind": GROUPS[r][2], **RESOURCES[r]}
            for r in served
            if (f"{GROUPS[r][0]}/{GROUPS[r][1]}" if GROUPS[r][0] else "") == wanted
        ]
        if not resources:
            return None
        version = wanted or "v1"
        return {"kind": "APIResourceList", "groupVersion": version, "resources": resources}

    def route(
        self, method: str, target: str, raw: bytes, content_type: str | None
    ) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(target)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        segments = [s for s in parts.path.split("/") if s]
        document = self.discovery(segments) if method == "GET" else None
        if document is not None:
            return 200, document
        if segments[:2] == ["api", "v1"]:
            rest, group = segments[2:], ""
        elif segments[:1] == ["apis"] and len(segments) >= 3:
            rest, group = segments[3:], f"{segments[1]}/{segments[2]}"
        else:
            return 404, status(404, "NotFound", "the server could not find the requested resource")
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if not rest or rest[0] not in GROUPS or rest[0] not in self.served:
            return 404, status(404, "NotFound", "the server could not find the requested resource")
        resource = rest[0]
        g, v, _ = GROUPS[resource]
        if group != (f"{g}/{v}" if g else ""):
            return 404, status(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        verb = {
            "GET": "get" if name else ("watch" if query.get("watch") else "list"),
            "PATCH": "patch",
            "PUT": "update",
        }[method]
        full = f"{resource}.{g}" if g else resource
        if (verb, full, namespace) in self.denied:  # None: at cluster scope
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            message = (
                f'{full} is forbidden: User "system:serviceaccount:lockwatch:reader" cannot'
                f' {verb} resource "{resource}" in API group "{g}" {where}'
            )
            return 403, status(403, "Forbidden", message, {"kind": resource})
        with self.lock:
            if verb == "list":
                return 200, self._list(resource, namespace, query)
            if verb == "watch":
                since = int(query.get("resourceVersion") or 0)
                events = [
                    {"type": kind, "object": obj}
                    for rv, kind, res, obj in self.events
                    if rv > since
                    and res == resource
                    and (namespace is None or obj["metadata"]["namespace"] == namespace)
                ]
                return 0, {"events": events}
            assert namespace is not None and name is not None
            found = self.objects.get((resource, namespace, name))
            if found is None:
                return 404, status(
                    404, "NotFound", f'{full} "{name}" not found', {"name": name, "kind": resource}
                )
            if verb == "get":
                return 200, found
            strict = query.get("fieldValidation") == "Strict"
            return self._update(resource, full, found, (verb, strict), raw, content_type)

    def _list(self, resource: str, namespace: str | None, query: dict[str, str]) -> dict[str, Any]:
        g, v, kind = GROUPS[resource]
        items = [
            {k: val for k, val in obj.items() if k not in ("kind", "apiVersion")}
            for (res, ns, _), obj in sorted(self.objects.items())
            if res == resource and (namespace is None or ns == namespace)
        ]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items) or 1
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.version)}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {
            "kind": f"{kind}List",
            "apiVersion": f"{g}/{v}" if g else v,
            "metadata": meta,
            "items": page,
        }

    def _update(
        self,
        resource: str,
        full: str,
        found: dict[str, Any],
        how: tuple[str, bool],
        raw: bytes,
        content_type: str | None,
    ) -> tuple[int, dict[str, Any]]:
        """A patch or update (`how`: the verb, and whether field validation is
        Strict): checked against the schema, then the resourceVersion."""
        verb, strict = how
        meta = found["metadata"]
        if verb == "patch" and content_type != "application/merge-patch+json":
            return 415, status(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types"
                " include: application/merge-patch+json",
            )
        body = json.loads(raw)
        spec = (
            merge(found.get("spec") or {}, body.get("spec"))
            if verb == "patch"
            else body.get("spec") or {}
        )
        unknown, errors = spec_problems(resource, spec)
        if errors:
            kind = GROUPS[resource][2]
            message = f'{kind} "{meta["name"]}" is invalid: {"; ".join(errors)}'
            return 422, status(422, "Invalid", message, {"name": meta["name"], "kind": kind})
        if unknown and strict:
            message = f'strict decoding error: unknown field "{unknown[0]}"'
            return 400, status(400, "BadRequest", message)
        spec = {key: value for key, value in spec.items() if f"spec.{key}" not in unknown}
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if (verb == "update" or wanted) and wanted != meta["resourceVersion"]:
            message = (
                f'Operation cannot be fulfilled on {full} "{meta["name"]}": the object has been'
                " modified; please apply your changes to the latest version and try again"
            )
            return 409, status(
                409,
                "Conflict",
                message,
                {"name": meta["name"], "group": GROUPS[resource][0], "kind": resource},
            )
        written = self._write(resource, meta["namespace"], meta["name"], spec, {})
        if unknown:
            return 200, {**written, WARNINGS: [f'unknown field "{field}"' for field in unknown]}
        return 200, written
