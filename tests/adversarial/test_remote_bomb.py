"""A hostile remote's gzip bomb is refused before it is parsed (issue 47, item
1): gzip of `{"locks":[{},{},…]}`, 50 MiB decoded from 51 KB on the wire, made
`ls --remote URL --json` reach 1.64 GB RSS, and `serve --remote` sat at 100 %
CPU with `/healthz` saying `ok`. Now the body is decoded a piece at a time and
its decoded size and JSON values are counted as it arrives: past a cap the
remote is refused in one line naming it, and serve marks it down
(`lockwatch_source_up` 0, named in `/healthz`).

The remote is the loopback server of test_remote_deadline.py (a hostile serve);
the bomb is made by zlib, as any gzip is.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lockwatch.sources.bounded import PIECE, Budget, TooLarge, decoded
from lockwatch.sources.remote.client import MAX_DOCUMENT_VALUES
from tests.adversarial.test_bounded_files import RSS_LIMIT_KB, run
from tests.adversarial.test_remote_deadline import Answer, Remote_
from tests.adversarial.test_serve_abuse import sample
from tests.serve.conftest import serving, wait_for

RAW_MIB = 50


def bomb(mib: int = RAW_MIB) -> bytes:
    """gzip of a lockwatch.ls/1 document whose locks are `mib` MiB of `{},`."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = (
        b'{"schema":"lockwatch.ls/1","host":"db7","generated_at":"2026-01-01T00:00:00Z","locks":['
    )
    out = [packer.compress(head)]
    block = b"{}," * (1 << 18)
    for _ in range(mib * (1 << 20) // len(block)):
        out.append(packer.compress(block))
    out.append(packer.compress(b"{}]}"))
    out.append(packer.flush())
    return b"".join(out)


def gzip_answer(body: bytes) -> bytes:
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@pytest.fixture(scope="module")
def bombed() -> bytes:
    return gzip_answer(bomb())


@pytest.fixture
def hostile(bombed: bytes) -> Iterator[Remote_]:
    yield from Remote_(Answer(bombed)).serve()


def test_the_bomb_is_small_on_the_wire(bombed: bytes) -> None:
    assert len(bombed) < 200_000  # the issue's: 51 KB


def test_a_gzip_piece_is_never_decoded_whole() -> None:
    packed = zlib.compress(b"{}," * (1 << 22))  # 12 MiB from a few KB
    pieces = list(decoded([packed], "deflate"))
    assert max(len(piece) for piece in pieces) <= PIECE
    budget = Budget(1 << 30, MAX_DOCUMENT_VALUES)
    with pytest.raises(TooLarge, match="JSON values"):
        for piece in decoded([packed], "deflate"):
            budget.take(piece)
    assert budget.size < (MAX_DOCUMENT_VALUES // 2) * 3 + 2 * PIECE


def test_ls_remote_json_refuses_the_bomb_in_one_line(hostile: Remote_, tmp_path: Path) -> None:
    done, rss = run(tmp_path, "ls", "--remote", hostile.url, "--json")
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1, said
    assert hostile.url in said[0] and "JSON values: refused" in said[0]
    assert rss < RSS_LIMIT_KB, rss


def test_serve_marks_the_bombing_remote_down(hostile: Remote_, tmp_path: Path) -> None:
    with serving(["--remote", hostile.url], tmp_path) as served:
        url = served.wait_healthy()

        def down() -> bool:
            text = httpx.get(f"{url}/metrics", timeout=10).text
            return sample(text, "lockwatch_source_up", source="remote") == 0.0

        wait_for(down, "the remote to be marked down")
        health = httpx.get(f"{url}/healthz", timeout=10)
        assert health.status_code == 200
        assert health.text.startswith("ok; down: remote:")
        assert "JSON values: refused" in health.text


def test_an_etcd_gateway_s_bomb_is_refused_in_one_line(hostile: Remote_, tmp_path: Path) -> None:
    # The same bomb from what lockwatch takes for etcd's JSON gateway.
    done, rss = run(tmp_path, "ls", "--etcd", hostile.url, "--json")
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1, said
    address = hostile.url.partition("://")[2]
    assert f"etcd {address}" in said[0] and "JSON values: refused" in said[0]
    assert rss < RSS_LIMIT_KB, rss
