"""Passwords: never shown, wherever they come from.

Other sessions' query text (ALTER ROLE … PASSWORD, dblink connection strings,
URLs with credentials) goes through the one scrubber before JSON, the detail
pane or an export. lockwatch's own password is taken from PGPASSFILE/~/.pgpass,
PGPASSWORD or the config's password_file, reaches the server (a fake one that
asks for it in clear text and keeps what it got), and when given on the command
line is warned about and overwritten in the process's arguments.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from lockwatch.model.incident import capture, to_json, to_markdown
from lockwatch.model.report import lock_record
from lockwatch.model.text import scrub_secrets
from lockwatch.sources.postgres.dsn import scrub
from lockwatch.sources.postgres.facts import PgBackend
from lockwatch.sources.postgres.records import to_locks
from tests.conftest import NOW
from tests.sources.test_pg_records import SERVER, row, sessions_of

TIMEOUT_S = 30.0

HOSTILE_QUERIES = [
    (
        "SELECT dblink_connect('c', 'hostaddr=10.0.0.9 dbname=app user=etl password=Tr0ub4dor')",
        "Tr0ub4dor",
    ),
    ("SELECT * FROM dblink('dbname=x password=''two words'' host=h', 'q')", "two words"),
    ("ALTER ROLE bob WITH ENCRYPTED PASSWORD 'hunter2' VALID UNTIL 'infinity'", "hunter2"),
    ("CREATE ROLE x LOGIN PASSWORD 'it''s-mine'", "it''s-mine"),
    ("CREATE ROLE x PASSWORD $pw$dollar-quoted$pw$", "dollar-quoted"),
    ("SELECT dblink('postgresql://etl:p@ss-w0rd@db2:5432/app', 'q')", "p@ss-w0rd"),
    ("SELECT dblink('postgres://etl:plain-pw@db2/app', 'q')", "plain-pw"),
    ("COPY t FROM PROGRAM 'PGPASSWORD=envsecret psql -h db2'", "envsecret"),
    ("CREATE USER MAPPING FOR u SERVER s OPTIONS (user 'u', password 'fdw-secret')", "fdw-secret"),
    ('SELECT \'{"password": "json-secret"}\'::jsonb', "json-secret"),
    ("SET my.conn = 'host=h sslpassword=keypass pwd=short'", "keypass"),
    ("ALTER ROLE x PASSWORD 'cut at two hundred charact…", "cut at two"),
    ("SELECT http_get('https://user:api-token@api.example.com/v1')", "api-token"),
    ("SELECT mysql_fdw('host=h user=u pass=short-pass')", "short-pass"),
    ("SELECT f('ssh key passphrase=open-sesame')", "open-sesame"),
    ("SELECT oauth('client_id=app client_secret=cl13nt-s3cret')", "cl13nt-s3cret"),
    ("SELECT http_get('https://api.example.com/v1?access_token=t0k3n-xyz')", "t0k3n-xyz"),
    ("SELECT http_get('https://api.example.com/v1?API_KEY=k3y-abc&q=1')", "k3y-abc"),
    ('SELECT \'{"token": "json-token", "apikey": "x"}\'::jsonb', "json-token"),
    ('SELECT \'{"client_secret": "json-client-secret"}\'::jsonb', "json-client-secret"),
    ('SELECT \'{"X-Api-Key": "json-api-key"}\'::jsonb', "json-api-key"),
    ("SELECT f('a_b_c_d_e_f_client_secret=deep-prefixed')", "deep-prefixed"),
]


@pytest.mark.parametrize(("query", "secret"), HOSTILE_QUERIES)
def test_the_scrubber_hides_each_spelling(query: str, secret: str) -> None:
    scrubbed = scrub_secrets(query)
    assert secret not in scrubbed, scrubbed
    assert "***" in scrubbed


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 1",
        "SELECT 'bypass=1', passage FROM t",
        "SELECT token_count, tokens_used, compass='north', secret_santa = 1 FROM t",
        "ALTER ROLE x PASSWORD NULL",
        "SELECT * FROM https_log WHERE url = 'https://example.com/a@b'",
    ],
)
def test_innocent_text_is_left_alone(query: str) -> None:
    assert scrub_secrets(query) == query


def test_the_scrubber_does_not_hang_on_hostile_text() -> None:
    """Query text is anyone's (up to 1 MB with track_activity_query_size): runs of
    letters and digits after a key word, or quotes by the thousand, must not make
    the scrubber read the rest of the text again from every position. Linear, a
    megabyte of each takes well under a second; quadratic (as a first cut of the
    `client_secret` rule was: 0.7 s for 16 KB) it takes hours, so this bound is a
    hang detector, not a speed target."""
    import time

    start = time.monotonic()
    for unit in ("0a", "a_", '"a', "0", '"', "x_token="):
        text = "token " + unit * (1_000_000 // len(unit))
        assert scrub_secrets(text).startswith("token ")
    assert time.monotonic() - start < 30


PASSWORDS = st.text(
    alphabet=st.characters(
        min_codepoint=33,
        max_codepoint=0x2FF,
        blacklist_characters="'\"\\/@ ",
    ),
    min_size=4,
    max_size=40,
)


@given(password=PASSWORDS)
def test_any_password_is_hidden_in_every_form(password: str) -> None:
    sql_quoted = password.replace("'", "''")
    for template in (
        "SELECT dblink_connect('host=h user=u password={p}')",
        "ALTER ROLE r PASSWORD '{q}'",
        "SELECT dblink('postgresql://u:{p}@h:5432/db', 'select 1')",
        "host=h password={p} user=u",
    ):
        text = template.format(p=password, q=sql_quoted)
        assert password not in scrub_secrets(text), text


def test_lockwatch_s_own_dsns_use_the_same_scrubber() -> None:
    message = "connection to postgresql://me:hunter2@db/app failed; dblink password=other"
    cleaned = scrub(message, "postgresql://me:hunter2@db/app")
    assert "hunter2" not in cleaned and "other" not in cleaned


# ----------------------------------------------------- query text in JSON, the pane, exports


def secret_locks() -> list[object]:
    rows = [
        row(pid=4242, query=HOSTILE_QUERIES[0][0]),
        row(pid=4243, query=HOSTILE_QUERIES[2][0], objid=43),
    ]
    return list(to_locks(rows, sessions_of(rows), server=SERVER, polled_at=NOW, idle_after=60.0))


def test_a_backend_never_holds_a_password_however_it_is_built() -> None:
    backend = PgBackend(pid=1, query="ALTER ROLE a PASSWORD 'x-secret'")
    assert "x-secret" not in (backend.query or "")
    from dataclasses import replace

    assert "y-secret" not in (replace(backend, query="password=y-secret").query or "")


def test_json_pane_and_exports_show_no_password() -> None:
    from lockwatch.model.board import Board
    from lockwatch.model.changes import ChangeSet, judge
    from lockwatch.model.process import StaticProcesses
    from lockwatch.ui.detail import describe

    locks = secret_locks()
    entries = tuple(judge(locks, StaticProcesses(), NOW, "here"))  # type: ignore[arg-type]
    board = Board("here")
    board.apply(ChangeSet(f"pg:{SERVER}", NOW, full=True, upserts=entries))
    shown: list[str] = []
    for entry in entries:
        shown.append(orjson.dumps(lock_record(entry.lock, entry.verdict, NOW)).decode())
        console = Console(record=True, width=200)
        console.print(describe(entry.lock, entry.verdict, (), NOW))
        shown.append(console.export_text())
    incident = capture(board, NOW, "here")
    shown += [to_json(incident).decode(), to_markdown(incident)]
    everything = "\n".join(shown)
    assert "password=***" in everything and "PASSWORD '***'" in everything
    for secret in ("Tr0ub4dor", "hunter2"):
        assert secret not in everything


# ------------------------------------------------------------------- servers for the CLI


class FakeServer:
    """A PostgreSQL server as far as authentication goes: it asks for the password
    in clear text, keeps what it was sent, and refuses. With `silent`, it accepts
    connections and never answers."""

    def __init__(self, silent: bool = False) -> None:
        self.silent = silent
        self.passwords: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            if self.silent:
                self._held.append(conn)
                continue
            try:
                self._one(conn)
            except OSError:
                pass
            finally:
                conn.close()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        while True:
            length, code = struct.unpack("!ii", _exactly(conn, 8))
            if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: no
                conn.sendall(b"N")
                continue
            _exactly(conn, length - 8)  # the startup packet: user, database
            break
        conn.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
        kind = _exactly(conn, 1)
        (length,) = struct.unpack("!i", _exactly(conn, 4))
        body = _exactly(conn, length - 4)
        if kind == b"p":
            self.passwords.append(body.rstrip(b"\0").decode())
        fields = b"SFATAL\0C28P01\0Mpassword authentication failed\0\0"
        conn.sendall(b"E" + struct.pack("!i", len(fields) + 4) + fields)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self.sock.close()


def _exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    try:
        yield fake
    finally:
        fake.close()


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("PG", "LOCKWATCH_"))
    }
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)
    return env


def ls_pg(dsn: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", "--pg", dsn, *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=env["HOME"],
        timeout=TIMEOUT_S,
        check=False,
    )


def conninfo(server: FakeServer) -> str:
    return f"host=127.0.0.1 port={server.port} user=u dbname=d sslmode=disable gssencmode=disable"


def test_pgpassfile_reaches_the_server(tmp_path: Path, server: FakeServer) -> None:
    """libpq reads PGPASSFILE itself: lockwatch must not get in its way."""
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{server.port}:d:u:from-pgpassfile\n")
    passfile.chmod(0o600)
    done = ls_pg(conninfo(server), clean_env(tmp_path, PGPASSFILE=str(passfile)))
    assert server.passwords == ["from-pgpassfile"], done.stderr
    assert "from-pgpassfile" not in done.stdout + done.stderr


def test_home_pgpass_reaches_the_server(tmp_path: Path, server: FakeServer) -> None:
    env = clean_env(tmp_path)
    pgpass = Path(env["HOME"]) / ".pgpass"
    pgpass.write_text(f"*:{server.port}:*:u:from-dot-pgpass\n")
    pgpass.chmod(0o600)
    ls_pg(conninfo(server), env)
    assert server.passwords == ["from-dot-pgpass"]


def test_pgpassword_reaches_the_server(tmp_path: Path, server: FakeServer) -> None:
    done = ls_pg(conninfo(server), clean_env(tmp_path, PGPASSWORD="from-env"))
    assert server.passwords == ["from-env"]
    assert "from-env" not in done.stdout + done.stderr
    assert "warning" not in done.stderr  # nothing on the command line to warn about


def test_the_config_password_file_reaches_the_server(tmp_path: Path, server: FakeServer) -> None:
    secret = tmp_path / "pg.password"
    secret.write_text("from-password-file\n")
    secret.chmod(0o600)
    config = tmp_path / "lockwatch.toml"
    config.write_text(f'[postgres]\ndsn = "{conninfo(server)}"\npassword_file = "{secret}"\n')
    env = clean_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=env["HOME"],
        timeout=TIMEOUT_S,
        check=False,
    )
    assert server.passwords == ["from-password-file"], done.stderr
    assert "from-password-file" not in done.stdout + done.stderr


def test_a_password_file_others_can_read_is_refused(tmp_path: Path, server: FakeServer) -> None:
    secret = tmp_path / "pg.password"
    secret.write_text("exposed\n")
    secret.chmod(0o644)
    config = tmp_path / "lockwatch.toml"
    config.write_text(f'[postgres]\ndsn = "{conninfo(server)}"\npassword_file = "{secret}"\n')
    env = clean_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=env["HOME"],
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2 and "chmod 600" in done.stderr
    assert server.passwords == []


def test_a_password_on_the_command_line_is_warned_about_and_hidden(tmp_path: Path) -> None:
    """The server never answers, so lockwatch is still running while /proc shows
    its arguments: the password must be gone from them."""
    silent = FakeServer(silent=True)
    try:
        dsn = f"postgresql://u:cmdline-s3cret@127.0.0.1:{silent.port}/d?connect_timeout=20"
        child = subprocess.Popen(
            [sys.executable, "-m", "lockwatch", "ls", "--json", "--pg", dsn],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=clean_env(tmp_path),
        )
        assert child.stderr is not None
        try:
            ready, _, _ = select.select([child.stderr], [], [], TIMEOUT_S)
            assert ready, "no warning within the time"
            warning = child.stderr.readline().decode()
            assert warning.startswith("lockwatch: warning: a password in --pg")
            assert "PGPASSFILE" in warning and "cmdline-s3cret" not in warning
            deadline = time.monotonic() + TIMEOUT_S
            while not silent._held and time.monotonic() < deadline:
                time.sleep(0.01)
            cmdline = Path(f"/proc/{child.pid}/cmdline").read_bytes()
            assert b"cmdline-s3cret" not in cmdline
            assert b"postgresql://u:**************@127.0.0.1" in cmdline
        finally:
            child.kill()
            child.wait(timeout=TIMEOUT_S)
        rest = child.stderr.read().decode()
        assert "warning" not in rest  # said once
    finally:
        silent.close()
