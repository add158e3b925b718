"""A token pasted into a --remote URL's query is refused without being echoed:
the refusal names the remote (scheme, host, port, path), never the query."""

from __future__ import annotations

import subprocess
import sys

import pytest

SECRET = "S3cretTok-4f1d"


@pytest.mark.parametrize(
    "url",
    [
        f"http://127.0.0.1:9/?token={SECRET}",
        f"http://127.0.0.1:9/v1/locks?access_token={SECRET}",
        f"http://127.0.0.1:9/#{SECRET}",
    ],
)
def test_a_query_is_refused_and_never_shown(url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--remote", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "no query or fragment" in out.stderr
    assert "127.0.0.1:9" in out.stderr
    assert SECRET not in out.stderr + out.stdout
