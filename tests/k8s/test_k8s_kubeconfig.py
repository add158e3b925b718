"""kubeconfig handling as kubectl does it, with real kubeconfig files written to
tmp (and kubectl's own `config view` of them to compare with), against the fake
API server over TLS (fakeapi.py, an imitation)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lockwatch.sources.k8s.kubeconfig import KubeconfigError, resolve
from lockwatch.sources.k8s.server import LeaseServer
from tests.conftest import run_cli
from tests.k8s.conftest import TOKEN, kubeconfig, lease
from tests.k8s.fakeapi import FakeApi


def kubectl_view(env_kubeconfig: str) -> dict[str, object]:
    done = subprocess.run(
        ["kubectl", "config", "view", "--minify", "--raw", "-o", "json"],
        capture_output=True, text=True, timeout=30, check=True,
        env={"KUBECONFIG": env_kubeconfig, "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )  # fmt: skip
    view: dict[str, object] = json.loads(done.stdout)
    return view


def reads(fake: FakeApi, environ: dict[str, str], **kwargs: str) -> list[str]:
    server = LeaseServer(resolve(environ, **kwargs))
    try:
        snapshot = server.poll()
        assert snapshot is not None, server.status.reason
        return [
            f"{lease['metadata']['namespace']}/{lease['metadata']['name']}"
            for lease in snapshot.leases
        ]
    finally:
        server.close()


def test_kubeconfig_files_merge_as_kubectl_merges_them(
    fake: FakeApi, tmp_path: Path, certificate: tuple[str, str]
) -> None:
    """The first file to set current-context wins, and the first to name a context,
    cluster or user; a file in the list that does not exist is skipped."""
    ca = {"certificate-authority": certificate[0]}
    first = kubeconfig(tmp_path / "first", fake.url, context="prod", current="prod", cluster=ca)
    second = kubeconfig(
        tmp_path / "second", "https://127.0.0.1:1", context="prod", current="staging", cluster=ca
    )
    third = kubeconfig(tmp_path / "third", fake.url, context="staging", current=None, cluster=ca)
    listed = f"{tmp_path / 'missing'}:{first}:{second}:{third}"
    environ = {"KUBECONFIG": listed}
    cluster = resolve(environ)
    view = kubectl_view(listed)
    assert view["current-context"] == cluster.context == "prod"
    clusters = view["clusters"]
    assert isinstance(clusters, list) and len(clusters) == 1
    assert clusters[0]["cluster"]["server"] == cluster.base == fake.url
    lease(fake, "apps", "one", "one-0")
    assert reads(fake, environ) == ["apps/one"]
    assert resolve(environ, "staging").context == "staging"
    with pytest.raises(KubeconfigError, match=r"no context 'nope'.*prod, staging"):
        resolve(environ, "nope")


def test_a_token_file_is_read_at_each_connection_and_ca_data_is_taken(
    fake: FakeApi, tmp_path: Path, certificate: tuple[str, str]
) -> None:
    (tmp_path / "sa").mkdir()
    (tmp_path / "sa" / "token").write_text("stale-token\n")
    ca_data = base64.b64encode(Path(certificate[0]).read_bytes()).decode()
    path = kubeconfig(
        tmp_path / "kubeconfig",
        fake.url,
        user={"tokenFile": "sa/token"},  # relative to the kubeconfig's directory
        cluster={"certificate-authority-data": ca_data},
    )
    environ = {"KUBECONFIG": str(path)}
    server = LeaseServer(resolve(environ))
    try:
        assert server.poll() is None and "unauthorized" in str(server.status.reason)
        (tmp_path / "sa" / "token").write_text(f"{TOKEN}\n")  # rotated, as projected tokens are
        assert server.poll() is not None
    finally:
        server.close()


def test_a_server_certificate_no_ca_vouches_for_is_refused_unless_told_to_skip(
    fake: FakeApi, tmp_path: Path
) -> None:
    environ = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", fake.url))}
    server = LeaseServer(resolve(environ))
    try:
        assert server.poll() is None
        assert "CERTIFICATE_VERIFY_FAILED" in str(server.status.reason)
    finally:
        server.close()
    skip = {"insecure-skip-tls-verify": True}
    environ = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc2", fake.url, cluster=skip))}
    assert reads(fake, environ) == []


def test_a_certificate_authority_that_is_no_certificate_is_one_line_naming_it(
    fake: FakeApi, tmp_path: Path
) -> None:
    not_pem = base64.b64encode(b"not a certificate").decode()
    (tmp_path / "ca.txt").write_text("not a certificate\n")
    for name, cluster in (
        ("data", {"certificate-authority-data": not_pem}),
        ("file", {"certificate-authority": "ca.txt"}),
    ):
        env = {"KUBECONFIG": str(kubeconfig(tmp_path / name, fake.url, cluster=cluster))}
        code, _, err = run_cli("ls", "--k8s", env=env)
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert "context 'fake': its certificate-authority is not a PEM certificate" in err


def test_client_certificates_load_from_data_and_files(
    fake: FakeApi, tmp_path: Path, certificate: tuple[str, str]
) -> None:
    cert, key = certificate
    as_data = {
        "client-certificate-data": base64.b64encode(Path(cert).read_bytes()).decode(),
        "client-key-data": base64.b64encode(Path(key).read_bytes()).decode(),
        "token": TOKEN,
    }
    ca = {"certificate-authority": cert}
    for user in (as_data, {"client-certificate": cert, "client-key": key, "token": TOKEN}):
        environ = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", fake.url, user=user, cluster=ca))}
        cluster = resolve(environ)
        assert cluster.ssl_context() is not None
        assert "BEGIN" not in repr(cluster) and TOKEN not in repr(cluster)
        assert reads(fake, environ) == []
    half = {"client-certificate": cert}
    environ = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", fake.url, user=half, cluster=ca))}
    with pytest.raises(KubeconfigError, match="needs its key"):
        resolve(environ)


def plugin(where: Path, body: str) -> str:
    """An exec credential plugin (as `aws eks get-token` is one): a script that
    answers an ExecCredential on stdout, as client-go's exec protocol has it."""
    script = where / "get-token"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_an_exec_plugins_token_is_used_and_kept_until_it_expires(
    fake: FakeApi, tmp_path: Path, certificate: tuple[str, str]
) -> None:
    calls = tmp_path / "calls"
    command = plugin(
        tmp_path,
        f"""
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
assert info["spec"]["interactive"] is False and os.environ["CLUSTER"] == "prod"
open({str(calls)!r}, "a").write("called\\n")
print(json.dumps({{"apiVersion": info["apiVersion"], "kind": "ExecCredential",
    "status": {{"token": {TOKEN!r}, "expirationTimestamp": "2999-01-01T00:00:00Z"}}}}))
""",
    )
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": command,
            "args": ["eks", "get-token", "--role", "secret-role"],
            "env": [{"name": "CLUSTER", "value": "prod"}],
        }
    }
    ca = {"certificate-authority": certificate[0]}
    environ = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", fake.url, user=user, cluster=ca))}
    lease(fake, "apps", "one", "one-0")
    server = LeaseServer(resolve(environ))
    try:
        assert server.poll() is not None and server.poll() is not None
    finally:
        server.close()
    assert calls.read_text() == "called\n"  # asked once: its token has not expired


def test_an_exec_plugin_that_fails_is_a_one_line_reason_naming_no_secret(
    fake: FakeApi, tmp_path: Path, certificate: tuple[str, str]
) -> None:
    command = plugin(
        tmp_path, 'sys.stderr.write("no SSO session: run aws sso login\\n"); sys.exit(3)'
    )
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": command,
            "args": ["--role", "secret-role"],
        }
    }
    ca = {"certificate-authority": certificate[0]}
    environ = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", fake.url, user=user, cluster=ca))}
    code, out, err = run_cli("ls", "--k8s", "--json", env=environ)
    assert code == 1
    (source,) = json.loads(out)["sources"]
    assert source["reason"] == "exec plugin get-token exited 3: no SSO session: run aws sso login"
    assert "secret-role" not in out + err and len(err.strip().splitlines()) == 1
    assert fake.requests == []


def test_auth_provider_plugins_are_a_one_line_error(tmp_path: Path) -> None:
    user = {"auth-provider": {"name": "oidc", "config": {"id-token": "secret-id-token"}}}
    environ = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", user=user))}
    code, _, err = run_cli("ls", "--k8s", env=environ)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("Error: --k8s: user 'fake-user' uses an")
    assert "auth-provider plugin" in err and "secret-id-token" not in err


def test_credentials_are_never_sent_over_plain_http(tmp_path: Path) -> None:
    from tests.k8s.fakeapi import FakeApi as Plain

    plain = Plain(token=TOKEN)
    try:
        environ = {"KUBECONFIG": str(kubeconfig(tmp_path / "kc", plain.url))}
        server = LeaseServer(resolve(environ))
        assert server.poll() is None
        assert "https:// only" in str(server.status.reason)
        assert plain.requests == []
        server.close()
    finally:
        plain.close()


def test_in_cluster_config_inside_a_pod_without_a_kubeconfig(
    fake: FakeApi, tmp_path: Path, certificate: tuple[str, str]
) -> None:
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(TOKEN)
    (account / "ca.crt").write_text(Path(certificate[0]).read_text())
    environ = {
        "HOME": str(tmp_path),  # no ~/.kube/config
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(fake.port),
    }
    cluster = resolve(environ, service_account=str(account))
    assert (cluster.context, cluster.name) == ("in-cluster", fake.name)
    lease(fake, "kube-system", "kube-scheduler", "node1_x")
    assert reads(fake, environ, service_account=str(account)) == ["kube-system/kube-scheduler"]
    with pytest.raises(KubeconfigError, match="not inside a pod"):
        resolve({"HOME": str(tmp_path)})
    with pytest.raises(KubeconfigError, match="to find context 'prod' in; without --k8s-co"):
        resolve(environ, "prod", service_account=str(account))


def test_bad_kubeconfig_files_are_one_line_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text("clusters: [\n")
    for path, message in (
        (broken, "not YAML at line"),
        (tmp_path / "nowhere", "no kubeconfig file at"),
        (kubeconfig(tmp_path / "nocurrent", "https://h:1", current=None), "no current-context"),
    ):
        code, _, err = run_cli("ls", "--k8s", env={"KUBECONFIG": str(path)})
        last = err.strip().splitlines()[-1]
        assert code == 2 and last.startswith("Error: --k8s: ") and message in last, err


def test_the_k8s_table_names_the_context_and_namespaces(
    fake: FakeApi, tmp_path: Path, certificate: tuple[str, str]
) -> None:
    ca = {"certificate-authority": certificate[0]}
    path = kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", context="other", current="other")
    kubeconfig(tmp_path / "kc2", fake.url, context="lab", current=None, cluster=ca)
    lease(fake, "apps", "a", "a-0")
    lease(fake, "ops", "b", "b-0")
    toml = tmp_path / "lockwatch.toml"
    toml.write_text(
        f'[k8s]\ncontext = "lab"\nnamespaces = ["ops"]\nkubeconfig = "{tmp_path / "kc2"}"\n'
    )
    environ = {"KUBECONFIG": str(path)}
    code, out, err = run_cli("ls", "--k8s", "--config", str(toml), "--json", env=environ)
    assert code == 0, err
    assert [lock["name"] for lock in json.loads(out)["locks"]] == ["ops/b"]
    toml.write_text('[k8s]\nnamespaces = "ops"\ncolour = "blue"\n')
    code, _, err = run_cli("ls", "--k8s", "--config", str(toml), env=environ)
    assert code == 2 and "[k8s] has no key 'colour'" in err


def test_a_namespace_flag_takes_one_namespace_and_a_list_in_one_is_an_error(
    fake: FakeApi, tmp_path: Path, config: dict[str, str]
) -> None:
    """--k8s-namespace is repeatable (its --help says so); `apps,ops` in one value
    would be read as a namespace that cannot exist, and show nothing: an error."""
    lease(fake, "apps", "a", "a-0")
    lease(fake, "ops", "b", "b-0")
    code, out, err = run_cli(
        "ls", "--k8s-namespace", "apps", "--k8s-namespace", "ops", "--json", env=config
    )
    assert code == 0, err
    assert sorted(lock["name"] for lock in json.loads(out)["locks"]) == ["apps/a", "ops/b"]
    code, _, err = run_cli("ls", "--k8s-namespace", "apps,ops", env=config)
    last = err.strip().splitlines()[-1]
    assert code == 2 and "Traceback" not in err
    assert last.startswith("Error: --k8s-namespace 'apps,ops' is not a namespace name"), err
    assert "repeat the option for several" in last
    toml = tmp_path / "lockwatch.toml"
    toml.write_text('[k8s]\nnamespaces = ["Apps"]\n')
    code, _, err = run_cli("ls", "--k8s", "--config", str(toml), env=config)
    assert code == 2 and "k8s.namespaces: 'Apps' is not a namespace name" in err, err
    _, help_text, _ = run_cli("ls", "--help")
    assert "(repeatable; implies --k8s" in " ".join(help_text.split())
