"""The Kubernetes source's settings: its [k8s] table, and the cluster and
namespaces a run names (flags over the table over the kubeconfig's current
context)."""

from __future__ import annotations

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
    return tuple(dict.fromkeys(given))
