"""Which remotes to ask, and with which token: URLs checked and named one way,
token files read once, at the start of a run.

A remote is the base URL of another host's `lockwatch serve`
(`http://db1:9464`); its locks are at `<URL>/v1/locks`. A URL never carries
credentials: a serve that wants a token gets it from a token file, sent as
`Authorization: Bearer`, and the token is never shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

LOCKS_PATH = "/v1/locks"
# Seconds for a whole answer (connect, headers, body): a 10,000-lock document
# (about 10 MB) crosses a slow link in less; a remote that takes longer is stalled.
DEFAULT_TIMEOUT = 10.0


class EndpointError(ValueError):
    """A remote URL that cannot be used; the message says why."""


@dataclass(frozen=True)
class Remote:
    url: str  # normalised: scheme://host[:port][/path], no credentials, no trailing /
    token: str | None = field(default=None, repr=False)

    @property
    def locks_url(self) -> str:
        return self.url + LOCKS_PATH


@dataclass(frozen=True)
class RemoteSettings:
    """The [remote] table."""

    urls: tuple[str, ...] = ()
    token_file: str | None = None  # for every remote without its own
    token_files: Mapping[str, str] = field(default_factory=dict)  # by normalised URL
    timeout: float = DEFAULT_TIMEOUT  # the deadline for a whole answer


def normalise(text: str) -> str:
    """`text` as lockwatch names a remote: `db1:9464` is `http://db1:9464`, a
    trailing `/` or `/v1/locks` is dropped. Credentials, a query or a fragment
    are refused: they have no place in a name that is shown everywhere."""
    raw = text.strip()
    if not raw or any(ch.isspace() for ch in raw):
        raise EndpointError(f"{text!r} is not a URL")
    if "://" not in raw:
        raw = "http://" + raw
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise EndpointError(f"{text!r} is not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise EndpointError(f"{text!r}: only http:// and https:// remotes are read")
    if "@" in parts.netloc:
        raise EndpointError(
            f"a remote URL carries no credentials: give its token in a token file"
            f" (--remote-token-file, or [remote] token_files) for {scheme}://{parts.hostname}"
        )
    if not parts.hostname:
        raise EndpointError(f"{text!r}: no host")
    if "?" in raw or "#" in raw:
        # Not echoed: `?token=…` is where a secret would be.
        raise EndpointError(
            f"{scheme}://{parts.netloc}{parts.path}: a remote URL has no query or fragment"
            " (not shown); give a token in a token file (--remote-token-file)"
        )
    path = parts.path.rstrip("/")
    if path.endswith(LOCKS_PATH):
        path = path[: -len(LOCKS_PATH)]
    if port == 0:
        raise EndpointError(f"{text!r}: port 0")
    return f"{scheme}://{parts.netloc.lower()}{path}"


def read_settings(tables: Mapping[str, Any], where: str) -> RemoteSettings:
    from lockwatch.config import ConfigError
    from lockwatch.sources.servers import config_seconds

    table = tables.get("remote", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [remote] must be a table")
    urls = table.get("urls", [])
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
        raise ConfigError(f"{where}: remote.urls must be a URL or a list of URLs")
    token_file = table.get("token_file")
    if token_file is not None and (not isinstance(token_file, str) or not token_file.strip()):
        raise ConfigError(f"{where}: remote.token_file must be a path")
    token_files = table.get("token_files", {})
    if not isinstance(token_files, dict) or not all(
        isinstance(path, str) and path.strip() for path in token_files.values()
    ):
        raise ConfigError(f"{where}: [remote.token_files] maps each URL to a token file's path")
    timeout = config_seconds(table, "timeout", DEFAULT_TIMEOUT, "remote.timeout", where, zero=False)
    try:
        named = tuple(dict.fromkeys(normalise(url) for url in urls))
        per_url = {normalise(url): path for url, path in token_files.items()}
    except EndpointError as exc:
        raise ConfigError(f"{where}: remote: {exc}") from None
    return RemoteSettings(named, token_file, per_url, timeout)
