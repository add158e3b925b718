"""The Kubernetes source's settings: its [k8s] table, and the cluster and
namespaces a run names (flags over the table over the kubeconfig's current
context)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockwatch.sources.contract import SourceError, Wanted

if TYPE_CHECKING:
    from lockwatch.sources.k8s.kubeconfig import Cluster


@dataclass(frozen=True)
class K8sSettings:
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    kubeconfig: str | None = None


DEFAULTS = K8sSettings()
# A namespace's name is a DNS label (RFC 1123), as the API server validates it.
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def bad_namespace(name: str) -> str | None:
    """Why `name` is no namespace (None: it is one). A list in one value
    (`apps,kube-system`) is the usual slip: it would be read as one namespace
    that cannot exist, and show no Leases."""
    if NAMESPACE.fullmatch(name):
        return None
    several = " (one namespace a value: repeat the option for several)" if "," in name else ""
    return (
        f"{name!r} is not a namespace name (lowercase letters, digits and '-', at most 63){several}"
    )


def _fail(where: str, message: str) -> None:
    from lockwatch.config import ConfigError

    raise ConfigError(f"{where}: {message}")


def read_settings(data: Mapping[str, Any], where: str) -> K8sSettings:
    table = data.get("k8s", {})
    if not isinstance(table, dict):
        _fail(where, "[k8s] must be a table")
    unknown = set(table) - {"context", "namespaces", "kubeconfig"}
    if unknown:
        _fail(where, f"[k8s] has no key {sorted(unknown)[0]!r} (context, namespaces, kubeconfig)")
    context, kubeconfig = table.get("context"), table.get("kubeconfig")
    for key, value in (("context", context), ("kubeconfig", kubeconfig)):
        if value is not None and (not isinstance(value, str) or not value):
            _fail(where, f"k8s.{key} must be a string")
    spaces = table.get("namespaces", [])
    spaces = [spaces] if isinstance(spaces, str) else spaces
    if not isinstance(spaces, list) or not all(isinstance(s, str) and s for s in spaces):
        _fail(where, "k8s.namespaces must be a string or a list of strings")
    for space in spaces:
        why = bad_namespace(space)
        if why is not None:
            _fail(where, f"k8s.namespaces: {why}")
    return K8sSettings(context, tuple(spaces), kubeconfig)


def cluster_of(wanted: Wanted) -> Cluster:
    """The cluster the run names (--k8s-context, else [k8s], else the current
    context); SourceError, one line, when the kubeconfig cannot give one."""
    from lockwatch.sources.k8s.kubeconfig import KubeconfigError, resolve

    settings: K8sSettings = wanted.settings("k8s") or DEFAULTS
    context = wanted.values.get("k8s_context") or settings.context
    try:
        return resolve(wanted.environ, context, settings.kubeconfig)
    except KubeconfigError as exc:
        raise SourceError(f"--k8s: {exc}") from None


def namespaces_of(wanted: Wanted) -> tuple[str, ...]:
    settings: K8sSettings = wanted.settings("k8s") or DEFAULTS
    given = tuple(wanted.values.get("k8s_namespaces") or ()) or settings.namespaces
    for name in given:
        why = bad_namespace(name)
        if why is not None:
            raise SourceError(f"--k8s-namespace {why}")
    return tuple(dict.fromkeys(given))
