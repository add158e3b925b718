"""The fake API server itself (fakeapi.py: an imitation built from the published
API schema, no kube-apiserver installs here), checked with kubectl: its discovery,
lists, watch from a resourceVersion, merge patches (409 on a stale
resourceVersion) and schema checks are what kubectl reads and lockwatch reads."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.k8s.conftest import by_name, lease, listing
from tests.k8s.fakeapi import FakeApi


def test_kubectl_reads_the_fake_as_it_reads_an_api_server(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """kubectl itself, against the fake: the same Lease list answer lockwatch reads."""
    lease(fake, "kube-system", "kube-controller-manager", "node1_3f0c", transitions=2)
    done = subprocess.run(
        [
            "kubectl", f"--kubeconfig={config['KUBECONFIG']}", "get", "--raw",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        ],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["kind"] == "LeaseList"
    (item,) = answer["items"]
    assert item["spec"]["holderIdentity"] == "node1_3f0c"
    locks = by_name(listing(config))
    assert locks["kube-system/kube-controller-manager"]["renew_time"].startswith(
        item["spec"]["renewTime"][:19]
    )


MERGE = "application/merge-patch+json"


def kubectl(config: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", f"--kubeconfig={config['KUBECONFIG']}", *args],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def test_kubectl_get_and_patch_see_the_fake_as_lockwatch_does(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """kubectl's own discovery, get and patch against the fake: the Leases it lists
    are lockwatch's, and its merge patch with a stale resourceVersion is the 409
    Conflict lockwatch's break relies on."""
    lease(fake, "kube-system", "kube-scheduler", "cp-1_9f8e", transitions=3)
    lease(fake, "apps", "web", "web-0")
    lease(fake, "apps", "idle", None)
    done = kubectl(config, "get", "leases", "--all-namespaces", "-o", "json")
    assert done.returncode == 0, done.stderr
    theirs = {
        f"{item['metadata']['namespace']}/{item['metadata']['name']}": (
            item["spec"].get("holderIdentity"),
            item["metadata"]["resourceVersion"],
        )
        for item in json.loads(done.stdout)["items"]
    }
    ours = {
        name: (lock["holder_identity"], lock["resource_version"])
        for name, lock in by_name(listing(config)).items()
    }
    assert ours == theirs and len(ours) == 3
    done = kubectl(
        config, "patch", "lease", "web", "-n", "apps", "--type", "merge",
        "-p", '{"metadata": {"resourceVersion": "1"}, "spec": {"holderIdentity": null}}',
    )  # fmt: skip
    assert done.returncode == 1 and "Error from server (Conflict)" in done.stderr
    assert fake.spec("apps", "web")["holderIdentity"] == "web-0"
    # The published schema, as the real server holds kubectl's writes to it.
    done = kubectl(config, "patch", "lease", "web", "-n", "apps", "--type", "merge",
                   "-p", '{"spec": {"holder": "x"}}')  # fmt: skip
    # Unknown fields dropped with a warning, as the server's default field validation does.
    assert done.returncode == 0 and 'Warning: unknown field "spec.holder"' in done.stderr
    assert "holder" not in fake.spec("apps", "web")
    strict = "/apis/coordination.k8s.io/v1/namespaces/apps/leases/web?fieldValidation=Strict"
    code, answer = fake.route("PATCH", strict, b'{"spec": {"holder": "x"}}', MERGE)
    assert (code, answer["reason"]) == (400, "BadRequest")
    assert answer["message"] == 'strict decoding error: unknown field "spec.holder"'
    done = kubectl(config, "patch", "lease", "web", "-n", "apps", "--type", "merge",
                   "-p", '{"spec": {"leaseDurationSeconds": "15"}}')  # fmt: skip
    assert done.returncode == 1 and "is invalid" in done.stderr
    with pytest.raises(ValueError, match=r"spec\.strategy: Required value"):
        fake.put("leasecandidates", "apps", "c", {"leaseName": "web", "binaryVersion": "1.34.0"})


def test_the_fake_watch_speaks_as_the_api_servers_with_a_resource_version(
    fake: FakeApi, config: dict[str, str]
) -> None:
    """kubectl's raw read of a watch from a resourceVersion: the events after it, in
    the API's watch-event shape (a check of the imitation itself)."""
    first = lease(fake, "apps", "w", "w-0")
    since = first["metadata"]["resourceVersion"]
    lease(fake, "apps", "w", "w-1", transitions=1)
    done = subprocess.run(
        [
            "kubectl", f"--kubeconfig={config['KUBECONFIG']}", "get", "--raw",
            "/apis/coordination.k8s.io/v1/namespaces/apps/leases"
            f"?watch=true&resourceVersion={since}&timeoutSeconds=1",
        ],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (event,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert event["type"] == "MODIFIED"
    assert event["object"]["spec"]["holderIdentity"] == "w-1"
    assert int(event["object"]["metadata"]["resourceVersion"]) > int(since)
