"""Where a Kubernetes API server is and how to prove who we are to it, read as
kubectl reads it (client-go's clientcmd loading rules):

- `$KUBECONFIG`, a list of files (joined by `:`), merged: for each context,
  cluster and user name the first file that names it wins, and so does the
  first file that sets `current-context`; files that do not exist are skipped.
  Without `$KUBECONFIG`, `~/.kube/config`.
- With no kubeconfig at all, inside a pod (`KUBERNETES_SERVICE_HOST`): the
  in-cluster config, the pod's service-account token and CA.
- A cluster's `server`, `certificate-authority` (a file, relative to the
  kubeconfig that names it) or `certificate-authority-data`,
  `insecure-skip-tls-verify`, `tls-server-name`; a user's
  `client-certificate`/`client-key` (files or `-data`), `token` or `tokenFile`
  (read again at each connection: projected tokens rotate), `username` and
  `password` (basic auth), an `exec` plugin's token (execplugin.py).
  `auth-provider` plugins are not supported: a one-line error says so.

Nothing read here is ever shown or put in argv: the `Cluster` keeps its
secrets out of its repr, and errors name files and fields, never values.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from lockwatch.sources.urls import host_port

if TYPE_CHECKING:
    import ssl

    from lockwatch.sources.k8s.execplugin import ExecPlugin

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# A kubeconfig is a few kilobytes; one far larger is not read (bounded inputs).
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
MAX_SECRET_FILE_BYTES = 1024 * 1024


class KubeconfigError(Exception):
    """The kubeconfig cannot give a usable cluster: one line, naming no secret."""


@dataclass(frozen=True)
class Cluster:
    """One API server and the credentials to read it with."""

    name: str  # host:port, as lock ids carry it
    base: str  # https://host:port[/path]
    context: str  # the kubeconfig context ("in-cluster" inside a pod)
    ca_pem: str | None = field(default=None, repr=False)
    insecure: bool = False
    tls_server_name: str | None = None
    cert_pem: str | None = field(default=None, repr=False)
    key_pem: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    basic: tuple[str, str] | None = field(default=None, repr=False)
    plugin: ExecPlugin | None = None

    def bearer(self) -> str | None:
        """The token to send now (a token file is read again: it rotates; an exec
        plugin's is asked for again when it expires)."""
        if self.plugin is not None:
            from lockwatch.sources.k8s.execplugin import ExecError

            try:
                return self.plugin.token()
            except ExecError as exc:
                raise KubeconfigError(str(exc)) from None
        if self.token_file:
            return _read_text(self.token_file, "tokenFile").strip() or None
        return self.token

    def headers(self) -> dict[str, str]:
        secret = self.token or self.token_file or self.basic or self.plugin
        if not self.base.startswith("https://") and secret:
            # Credentials in clear text to whoever listens on the way: never sent.
            raise KubeconfigError(
                f"context {self.context!r}: its server is http://, and lockwatch sends a token"
                " or password over https:// only"
            )
        token = self.bearer()
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self.basic is not None:
            raw = f"{self.basic[0]}:{self.basic[1]}".encode()
            return {"Authorization": f"Basic {base64.b64encode(raw).decode('ascii')}"}
        return {}

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for an https server (None: plain http)."""
        import ssl

        if not self.base.startswith("https://"):
            return None
        try:
            context = ssl.create_default_context(cadata=self.ca_pem or None)
        except ssl.SSLError:
            # ssl's own words ("no start line: cadata does not contain a certificate")
            # name neither the field nor the context.
            raise KubeconfigError(
                f"context {self.context!r}: its certificate-authority is not a PEM certificate"
            ) from None
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_pem and self.key_pem:
            _load_chain(context, self.cert_pem, self.key_pem)
        return context


def _load_chain(context: ssl.SSLContext, cert: str, key: str) -> None:
    """The client certificate and key into `context`: ssl reads them from files
    only, so they are written to a private directory and removed at once."""
    import ssl
    import tempfile

    with tempfile.TemporaryDirectory(prefix="lockwatch-k8s-") as where:
        cert_path, key_path = Path(where, "cert.pem"), Path(where, "key.pem")
        for path, text in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(text)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError:
            raise KubeconfigError(
                "the client certificate and key do not load (not PEM, or not a pair)"
            ) from None


def _read_text(path: str, what: str) -> str:
    try:
        with open(path, "rb") as source:
            data = source.read(MAX_SECRET_FILE_BYTES + 1)
    except OSError as exc:
        raise KubeconfigError(f"{what} {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SECRET_FILE_BYTES:
        raise KubeconfigError(f"{what} {path}: larger than {MAX_SECRET_FILE_BYTES} bytes")
    return data.decode("utf-8", "replace")


def _data(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise KubeconfigError(f"{what} is not base64 text")
    try:
        return base64.b64decode(value, validate=False).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise KubeconfigError(f"{what} is not base64 of PEM text") from None


# -- loading and merging ------------------------------------------------------------


@dataclass
class Merged:
    """The kubeconfig files merged: each name's entry with the file it came from."""

    current: str | None = None
    contexts: dict[str, tuple[dict[str, Any], Path]] = field(default_factory=dict)
    clusters: dict[str, tuple[dict[str, Any], Path]] = field(default_factory=dict)
    users: dict[str, tuple[dict[str, Any], Path]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def kubeconfig_paths(environ: Mapping[str, str], explicit: str | None = None) -> list[Path]:
    """The files kubectl would read: `explicit`, else `$KUBECONFIG`'s list, else
    ~/.kube/config."""
    if explicit:
        return [Path(explicit).expanduser()]
    listed = environ.get("KUBECONFIG")
    if listed:
        return [Path(part).expanduser() for part in listed.split(os.pathsep) if part]
    home = environ.get("HOME") or os.path.expanduser("~")
    return [Path(home, ".kube", "config")]


def _load_file(path: Path) -> dict[str, Any] | None:
    import yaml

    try:
        with open(path, "rb") as source:
            data = source.read(MAX_KUBECONFIG_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(f"kubeconfig {path}: larger than {MAX_KUBECONFIG_BYTES} bytes")
    try:
        loaded = yaml.safe_load(data)  # JSON is YAML too
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError(f"kubeconfig {path}: not YAML{where}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (not a mapping)")
    return loaded


def _named(
    entries: Any, key: str, path: Path, into: dict[str, tuple[dict[str, Any], Path]]
) -> None:
    if entries is None:
        return
    if not isinstance(entries, list):
        raise KubeconfigError(f"kubeconfig {path}: {key}s is not a list")
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise KubeconfigError(f"kubeconfig {path}: a {key} without a name")
        body = entry.get(key) or {}
        if not isinstance(body, dict):
            raise KubeconfigError(f"kubeconfig {path}: {key} {entry['name']} is not a mapping")
        into.setdefault(entry["name"], (body, path))  # the first file to name it wins


def merge(paths: list[Path]) -> Merged:
    merged = Merged()
    for path in paths:
        loaded = _load_file(path)
        if loaded is None:
            continue
        merged.files.append(path)
        current = loaded.get("current-context")
        if merged.current is None and isinstance(current, str) and current:
            merged.current = current
        _named(loaded.get("contexts"), "context", path, merged.contexts)
        _named(loaded.get("clusters"), "cluster", path, merged.clusters)
        _named(loaded.get("users"), "user", path, merged.users)
    return merged


def _relative(value: Any, path: Path) -> str:
    """A file a kubeconfig names, relative to that kubeconfig's directory."""
    return str(path.parent / Path(str(value)).expanduser())


def _server(server: Any, what: str) -> tuple[str, str]:
    """(host:port, base URL) of a cluster's `server`."""
    if not isinstance(server, str) or not server:
        raise KubeconfigError(f"{what} has no server")
    try:
        parts = urlsplit(server if "://" in server else f"https://{server}")
        port = parts.port
    except ValueError:
        raise KubeconfigError(f"{what}: server is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise KubeconfigError(f"{what}: server must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise KubeconfigError(f"{what}: server URL carries credentials; refused")
    name = host_port(parts.hostname, port or (443 if parts.scheme == "https" else 80))
    return name, f"{parts.scheme}://{name}{parts.path.rstrip('/')}"


def _user_fields(user: dict[str, Any], path: Path, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if user.get("exec"):
        from lockwatch.sources.k8s.execplugin import from_user

        spec = user["exec"]
        try:
            out["plugin"] = from_user(spec if isinstance(spec, dict) else {}, what)
        except ValueError as exc:
            raise KubeconfigError(str(exc)) from None
    if user.get("auth-provider"):
        raise KubeconfigError(
            f"{what} uses an auth-provider plugin, which lockwatch does not support:"
            " give it a token, tokenFile or client certificate"
        )
    if user.get("client-certificate-data"):
        out["cert_pem"] = _data(user["client-certificate-data"], f"{what} client-certificate-data")
    elif user.get("client-certificate"):
        out["cert_pem"] = _read_text(
            _relative(user["client-certificate"], path), "client-certificate"
        )
    if user.get("client-key-data"):
        out["key_pem"] = _data(user["client-key-data"], f"{what} client-key-data")
    elif user.get("client-key"):
        out["key_pem"] = _read_text(_relative(user["client-key"], path), "client-key")
    if bool(out.get("cert_pem")) != bool(out.get("key_pem")):
        raise KubeconfigError(
            f"{what}: a client certificate needs its key, and a key its certificate"
        )
    if isinstance(user.get("token"), str) and user["token"]:
        out["token"] = user["token"]
    elif user.get("tokenFile"):
        out["token_file"] = _relative(user["tokenFile"], path)
    if isinstance(user.get("username"), str) and isinstance(user.get("password"), str):
        out["basic"] = (user["username"], user["password"])
    return out


def from_kubeconfig(merged: Merged, context: str | None) -> Cluster:
    name = context or merged.current
    if not name:
        files = ", ".join(map(str, merged.files))
        raise KubeconfigError(f"no current-context in {files}: name one with --k8s-context")
    if name not in merged.contexts:
        known = ", ".join(sorted(merged.contexts)[:10]) or "none"
        raise KubeconfigError(f"no context {name!r} in the kubeconfig (contexts: {known})")
    ctx, _ = merged.contexts[name]
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if not isinstance(cluster_name, str) or cluster_name not in merged.clusters:
        raise KubeconfigError(f"context {name!r} names no cluster the kubeconfig has")
    cluster, cluster_path = merged.clusters[cluster_name]
    where, base = _server(cluster.get("server"), f"cluster {cluster_name!r}")
    ca: str | None = None
    if cluster.get("certificate-authority-data"):
        ca = _data(cluster["certificate-authority-data"], f"cluster {cluster_name!r} CA data")
    elif cluster.get("certificate-authority"):
        ca = _read_text(
            _relative(cluster["certificate-authority"], cluster_path), "certificate-authority"
        )
    user: dict[str, Any] = {}
    if isinstance(user_name, str) and user_name:
        if user_name not in merged.users:
            raise KubeconfigError(
                f"context {name!r} names user {user_name!r}, which the kubeconfig lacks"
            )
        body, user_path = merged.users[user_name]
        user = _user_fields(body, user_path, f"user {user_name!r}")
    server_name = cluster.get("tls-server-name")
    return Cluster(
        where,
        base,
        name,
        ca_pem=ca,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=server_name if isinstance(server_name, str) and server_name else None,
        **user,
    )


def in_cluster(environ: Mapping[str, str], root: str = SERVICE_ACCOUNT) -> Cluster:
    """The pod's own API server and service account, as client-go's InClusterConfig."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeconfigError("not inside a pod: KUBERNETES_SERVICE_HOST/PORT unset")
    token_file = str(Path(root, "token"))
    ca = _read_text(str(Path(root, "ca.crt")), "service-account CA")
    where, base = _server(f"https://{host_port(host, int(port))}", "in-cluster")
    return Cluster(where, base, "in-cluster", ca_pem=ca, token_file=token_file)


def resolve(
    environ: Mapping[str, str],
    context: str | None = None,
    kubeconfig: str | None = None,
    service_account: str = SERVICE_ACCOUNT,
) -> Cluster:
    """The cluster a run reads: the kubeconfig's context (named, else current),
    else inside a pod with no kubeconfig, the in-cluster config."""
    paths = kubeconfig_paths(environ, kubeconfig)
    merged = merge(paths)
    if merged.files:
        return from_kubeconfig(merged, context)
    if kubeconfig or environ.get("KUBECONFIG"):
        raise KubeconfigError(f"no kubeconfig file at {', '.join(map(str, paths))}")
    if environ.get("KUBERNETES_SERVICE_HOST"):
        if not context:
            return in_cluster(environ, service_account)
        # Inside a pod a context is a kubeconfig's, and there is none.
        raise KubeconfigError(
            f"no kubeconfig ({paths[0]} missing, $KUBECONFIG unset) to find context"
            f" {context!r} in; without --k8s-context, this pod's service account is read"
        )
    raise KubeconfigError(
        f"no kubeconfig ({paths[0]} missing, $KUBECONFIG unset) and not inside a pod"
    )
