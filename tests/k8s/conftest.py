"""The k8s source's tests: a fake API server (fakeapi.py: an imitation, no
kube-apiserver installs here) and real kubeconfig files written to tmp."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.fakeapi import FakeApi, micro

TOKEN = "s3cret-token-value"


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return tls_pair(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def fake(certificate: tuple[str, str]) -> Iterator[FakeApi]:
    """The fake API server over TLS, its certificate the kubeconfig's CA (a file)."""
    api = FakeApi(token=TOKEN, tls=certificate)
    try:
        yield api
    finally:
        api.close()


def kubeconfig(
    path: Path,
    server: str,
    *,
    context: str = "fake",
    user: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
    current: str | None = "fake",
) -> Path:
    """A kubeconfig as kubectl writes one (YAML), with one context."""
    import yaml

    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": f"{context}-cluster", "cluster": {"server": server, **(cluster or {})}}
        ],
        "users": [
            {"name": f"{context}-user", "user": user if user is not None else {"token": TOKEN}}
        ],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": f"{context}-cluster", "user": f"{context}-user"},
            }
        ],
    }
    if current is not None:
        document["current-context"] = current
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture
def config(fake: FakeApi, tmp_path: Path, certificate: tuple[str, str]) -> dict[str, str]:
    """The environment of a run whose kubeconfig names the fake server."""
    ca = {"certificate-authority": certificate[0]}
    return {"KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", fake.url, cluster=ca))}


def lease(
    fake: FakeApi,
    namespace: str,
    name: str,
    holder: str | None,
    *,
    renewed: float = 1.0,
    duration: int | None = 15,
    transitions: int = 0,
    now: datetime | None = None,
) -> dict[str, Any]:
    """A Lease as client-go's leader election writes it, renewed `renewed` s ago."""
    at = now or datetime.now(UTC)
    spec: dict[str, Any] = {
        "acquireTime": micro(at - timedelta(hours=1)),
        "renewTime": micro(at - timedelta(seconds=renewed)),
        "leaseTransitions": transitions,
    }
    if holder is not None:
        spec["holderIdentity"] = holder
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return fake.put("leases", namespace, name, spec)


def listing(env: dict[str, str], *args: str) -> dict[str, Any]:
    """`lockwatch ls --k8s --json` (and `args`) as a document."""
    import json

    from tests.conftest import run_cli

    code, out, err = run_cli("ls", "--k8s", "--json", *args, env=env)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A listing's Leases by namespace/name."""
    return {lock["name"]: lock for lock in document["locks"] if lock["format"] == "k8s-lease"}


def tls_pair(where: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key (openssl, as a cluster's
    CA would sign one): (cert, key) paths."""
    cert, key = where / "server.crt", where / "server.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)
