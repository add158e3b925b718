"""Server URLs (redis://, http:// ...) named without ever showing a password.

What the screen, the JSON and the audit log call a server is its display name
(`host:port`, and the database where there is one); error messages from client
libraries go through `scrub` with the secrets the URL carried.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

from lockwatch.model.lazyre import lazy_compile

# user:password@ in any URL, and password=... in a query string.
_USERINFO = lazy_compile(r"(://[^:/@\s]*):[^@\s/]*@")
_QUERY_PASSWORD = lazy_compile(r"((?:^|[?&;\s])password=)[^&#\s]*", re.IGNORECASE)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret taken out: the ones given (as written and
    percent-decoded), and anything that looks like a password in a URL."""
    cleaned = text
    forms = {form for secret in secrets if secret for form in (secret, unquote(secret))}
    for secret in sorted(forms, key=len, reverse=True):
        cleaned = cleaned.replace(secret, "***")
    cleaned = _USERINFO.sub(r"\1:***@", cleaned)
    return _QUERY_PASSWORD.sub(r"\1***", cleaned)


def host_port(host: str, port: int) -> str:
    """`host:port`, with an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
