"""A kubeconfig user's `exec` credential plugin (`aws eks get-token`,
`gke-gcloud-auth-plugin`, kubelogin), run as kubectl runs it
(client.authentication.k8s.io ExecCredential): its command with its args and
env from the kubeconfig, `KUBERNETES_EXEC_INFO` saying it may not ask anyone
anything, no stdin, a deadline; its stdout an ExecCredential whose
`status.token` is the bearer token, kept until its `expirationTimestamp`.

The token never reaches argv, output or a log: what is said of a failure is
the command's name, its exit status and the plugin's own first line on stderr.
Plugins that answer with a client certificate are not supported (said so).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

# What a plugin may take to answer (a cloud CLI that refreshes its own login).
TIMEOUT = 20.0
MAX_OUTPUT = 1024 * 1024
# A token about to expire is fetched again this long before.
EARLY = timedelta(seconds=30)
VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class ExecError(Exception):
    """The plugin did not give a token: one line, naming no secret."""


@dataclass(frozen=True)
class ExecPlugin:
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    api_version: str = VERSIONS[0]
    # The token it gave and until when (process memory only, never written).
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return os.path.basename(self.command)

    def token(self, now: datetime | None = None) -> str:
        at = now or datetime.now(UTC)
        kept, until = self._cache.get("token"), self._cache.get("until")
        if kept and (until is None or at < until - EARLY):
            return str(kept)
        token, until = self._run()
        self._cache.update(token=token, until=until)
        return token

    def _run(self) -> tuple[str, datetime | None]:
        info = {
            "apiVersion": self.api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        }
        environ = {**os.environ, **dict(self.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            done = subprocess.run(
                [self.command, *self.args],
                env=environ,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=TIMEOUT,
                check=False,
            )
        except FileNotFoundError:
            raise ExecError(f"exec plugin {self.name}: not found on PATH") from None
        except subprocess.TimeoutExpired:
            raise ExecError(f"exec plugin {self.name}: no answer in {TIMEOUT:g} s") from None
        except OSError as exc:
            raise ExecError(f"exec plugin {self.name}: {exc.strerror or exc}") from None
        if done.returncode != 0:
            first = done.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
            said = f": {first[0][:200]}" if first else ""
            raise ExecError(f"exec plugin {self.name} exited {done.returncode}{said}")
        return _credential(done.stdout[:MAX_OUTPUT], self.name)


def _credential(out: bytes, name: str) -> tuple[str, datetime | None]:
    try:
        answer = json.loads(out)
    except ValueError:
        raise ExecError(f"exec plugin {name}: its answer is not an ExecCredential") from None
    status = answer.get("status") if isinstance(answer, dict) else None
    if not isinstance(status, dict):
        raise ExecError(f"exec plugin {name}: its ExecCredential has no status")
    token = status.get("token")
    if not isinstance(token, str) or not token:
        if status.get("clientCertificateData"):
            raise ExecError(
                f"exec plugin {name} answers with a client certificate, which lockwatch does"
                " not take from a plugin: give it a token"
            )
        raise ExecError(f"exec plugin {name}: its ExecCredential has no token")
    return token, _expiry(status.get("expirationTimestamp"))


def _expiry(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def from_user(spec: Mapping[str, Any], what: str) -> ExecPlugin:
    """The plugin a kubeconfig user's `exec` names; ValueError with a reason."""
    command = spec.get("command")
    if not isinstance(command, str) or not command:
        raise ValueError(f"{what}: its exec plugin names no command")
    args = spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError(f"{what}: its exec plugin's args are not a list of strings")
    env: list[tuple[str, str]] = []
    for entry in spec.get("env") or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            env.append((entry["name"], str(entry.get("value") or "")))
    version = spec.get("apiVersion")
    if version not in VERSIONS:
        said = f"speaks {version!r}" if version else "names no apiVersion"
        raise ValueError(f"{what}: its exec plugin {said}, not {' or '.join(VERSIONS)}")
    return ExecPlugin(command, tuple(args), tuple(env), str(version))
