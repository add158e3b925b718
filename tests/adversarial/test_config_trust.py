"""A lockwatch.toml someone else planted is not trusted (issue 36, item 1).

lockwatch runs as root in shared lock directories (/run/lock is 1777). A config
there that another user owns, or that anyone but its owner could rewrite, is
passed over with one line saying which file, why, and how to use it on purpose;
`--config FILE` names one on purpose. Unknown keys and tables are errors with the
closest known name; nesting and size are bounded; every error is one line, exit 2.

"Another user" is `nobody` (uid 65534): the files are chowned to it, so these
tests need root (as lockwatch's users are), and skip without it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockwatch.config import ConfigError, from_mapping, refuse_unknown
from lockwatch.sources.registry import configured

NOBODY = 65534
TIMEOUT_S = 60.0  # only keeps a broken run from hanging the suite

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chowns files to another user")


def lockwatch(cwd: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LOCKWATCH_", "PG", "REDIS"))
    }
    env["XDG_CONFIG_HOME"] = str(home / "config")
    env["XDG_STATE_HOME"] = str(home / "state")
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


class Listener:
    """A loopback HTTP "remote" that keeps every byte sent to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received = bytearray()
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    self.received += conn.recv(65536)
                    conn.sendall(
                        b"HTTP/1.1 500 no\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    served = Listener()
    yield served
    served.close()


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A directory like /run/lock: root's, world-writable, sticky."""
    path = tmp_path / "shared"
    path.mkdir()
    path.chmod(0o1777)
    return path


def root_token(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    vault.mkdir(mode=0o700)
    token = vault / "remote.token"
    token.write_text("root-s3cret-token\n")
    token.chmod(0o600)
    return token


def planted(shared: Path, port: int, token: Path) -> Path:
    config = shared / "lockwatch.toml"
    config.write_text(
        f'[remote]\nurls = ["http://127.0.0.1:{port}"]\ntoken_file = "{token}"\n'
        '[actions]\naudit_log = "/tmp/elsewhere.jsonl"\n'
    )
    return config


@needs_root
def test_a_planted_config_is_not_loaded_and_the_token_never_leaves(
    tmp_path: Path, shared: Path, listener: Listener
) -> None:
    """The issue's HIGH: `nobody` writes ./lockwatch.toml in a shared directory
    naming their server and root's token file; root runs `lockwatch ls` there."""
    token = root_token(tmp_path)
    config = planted(shared, listener.port, token)
    os.chown(config, NOBODY, NOBODY)
    done = lockwatch(shared, "ls", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert b"root-s3cret-token" not in listener.received
    assert listener.connections == 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{config}: not loaded: owned by nobody" in lines[0]
    assert f"chown root {config}" in lines[0]
    assert f"--config {config}" in lines[0]
    assert "Traceback" not in done.stderr


@needs_root
@pytest.mark.parametrize("mode", [0o666, 0o664, 0o646])
def test_a_config_others_can_write_is_not_loaded(
    tmp_path: Path, shared: Path, listener: Listener, mode: int
) -> None:
    """Root's own file, but writable by a group (one with others in it: here
    nogroup) or everyone: anyone there could have put the [remote] in it."""
    config = planted(shared, listener.port, root_token(tmp_path))
    os.chown(config, 0, NOBODY)
    config.chmod(mode)
    done = lockwatch(shared, "ls", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert listener.connections == 0
    assert f"{config}: not loaded:" in done.stderr and "can write it" in done.stderr
    assert "chmod go-w" in done.stderr


@needs_root
def test_a_config_in_a_directory_anyone_can_rename_in_is_not_loaded(
    tmp_path: Path, listener: Listener
) -> None:
    """World-writable without the sticky bit: root's file there can be replaced."""
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    config = planted(open_dir, listener.port, root_token(tmp_path))
    done = lockwatch(open_dir, "ls", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert listener.connections == 0
    assert "without the sticky bit" in done.stderr and f"chmod +t {open_dir}" in done.stderr
    assert str(config) in done.stderr


@needs_root
def test_a_root_config_in_a_sticky_directory_is_loaded(
    tmp_path: Path, shared: Path, listener: Listener
) -> None:
    """The rule is not "never in a shared directory": root's own 0644 file in a
    sticky directory is root's, and nobody else can replace it."""
    planted(shared, listener.port, root_token(tmp_path))
    done = lockwatch(shared, "ls", "--json", home=tmp_path)
    assert "not loaded" not in done.stderr
    assert listener.connections >= 1  # it asked the configured remote


@needs_root
def test_an_explicit_config_of_another_users_file_is_used_on_purpose(
    tmp_path: Path, shared: Path
) -> None:
    """--config FILE after reading it: its owner may be anyone, as long as only its
    owner can write it."""
    config = shared / "lockwatch.toml"
    config.write_text("readonly = true\n")
    os.chown(config, NOBODY, NOBODY)
    lock = shared / "w.pid"
    lock.write_text("999999\n")
    done = lockwatch(
        shared, "break", str(lock), "--reason", "r", "--yes", "--config", str(config),
        home=tmp_path,
    )  # fmt: skip
    assert "read-only: readonly = true in the config" in done.stderr
    assert lock.exists()
    config.chmod(0o666)
    done = lockwatch(shared, "ls", "--config", str(config), home=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"lockwatch: {config}: not loaded: every user can write it (mode 0666)"
        f" (chmod go-w {config})"
    )


@needs_root
def test_a_token_file_a_config_names_must_be_roots_too(tmp_path: Path, listener: Listener) -> None:
    """Files a config points at follow the same rule: a token file `nobody` owns
    (and so chose) is refused before any remote is asked."""
    token = tmp_path / "their.token"
    token.write_text("theirs\n")
    token.chmod(0o600)
    os.chown(token, NOBODY, NOBODY)
    home = tmp_path / "home"
    home.mkdir()
    config = planted(home, listener.port, token)
    done = lockwatch(home, "ls", "--config", str(config), home=tmp_path)
    assert done.returncode == 2
    assert "owned by nobody" in done.stderr and "Traceback" not in done.stderr
    assert listener.connections == 0


@needs_root
def test_group_write_for_the_owners_own_group_is_no_one_elses(
    tmp_path: Path, shared: Path, listener: Listener
) -> None:
    """umask 002 systems: root:root 0664 is writable by root's own group, which
    has nobody else in it: trusted (as long as that stays so)."""
    import grp
    import pwd

    if grp.getgrgid(0).gr_mem or any(u.pw_gid == 0 and u.pw_uid != 0 for u in pwd.getpwall()):
        pytest.skip("this host's root group has members, or is another account's primary group")
    config = planted(shared, listener.port, root_token(tmp_path))
    config.chmod(0o664)
    done = lockwatch(shared, "ls", "--json", home=tmp_path)
    assert "not loaded" not in done.stderr
    assert listener.connections >= 1


# -- what a config may hold -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[serv]\nlisten = "127.0.0.1:1"\n', "unknown table [serv] (did you mean [serve]?)"),
        ("readonlyy = true\n", "unknown key readonlyy (did you mean readonly?)"),
        ('[serve]\nlisen = "x"\n', "unknown key serve.lisen (did you mean serve.listen?)"),
        ('[actions]\naudit_lgo = "x"\n', "unknown key actions.audit_lgo (did you mean"),
        ('[redis]\npatern = ["x"]\n', "unknown key redis.patern (did you mean redis.patterns?)"),
        ("[postgres]\nidle_afer = 3\n", "did you mean postgres.idle_after?"),
        ("[remote]\ntoken_fil = 'x'\n", "did you mean remote.token_file?"),
        ("[kernel]\nenable = true\n", "did you mean kernel.enabled?"),
        ("[advisory.namespace]\n1 = 'x'\n", "did you mean [advisory.namespaces]?"),
        ("[etcd]\nurls = []\n", "did you mean etcd.url?"),
        ("[mysql]\ndsns = []\n", "did you mean mysql.dsn?"),
        ("[consul]\nurl = 'x'\n", "unknown table [consul]"),
    ],
)
def test_unknown_keys_and_tables_are_one_line_errors(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "lockwatch.toml").write_text(text)
    done = lockwatch(tmp_path, "ls", home=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert said in done.stderr


def test_free_form_tables_keep_their_own_keys() -> None:
    """[advisory.keys] and [remote.token_files] map the user's own names."""
    config = from_mapping(
        {
            "advisory": {"keys": {"42": "billing"}, "namespaces": {"1": "agent"}},
            "remote": {"token_files": {"http://127.0.0.1:1": "/t"}},
            "serve": {"listen": "127.0.0.1:1"},
        },
        "t.toml",
    )
    configured(config)  # no error


def test_refuse_unknown_names_the_closest_key() -> None:
    config = from_mapping({"actions": {"tombstone": "x"}}, "t.toml")
    with pytest.raises(
        ConfigError, match=r"actions\.tombstone \(did you mean actions\.tombstone_dir\?\)"
    ):
        refuse_unknown(config.tables, config.where)


@pytest.mark.parametrize(
    "text",
    [
        "a = " + "[" * 50_000 + "]" * 50_000 + "\n",  # tomllib recurses: RecursionError
        "a" + ".a" * 5_000 + " = 1\n",  # dotted keys nest without recursing
        "a = " + "{b = " * 2_000 + "1" + "}" * 2_000 + "\n",
    ],
    ids=["arrays", "dotted-keys", "inline-tables"],
)
def test_deep_nesting_is_a_one_line_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "lockwatch.toml").write_text(text)
    done = lockwatch(tmp_path, "ls", home=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert done.stderr.strip().endswith(
        "nested too deeply (more than 16 levels of tables and arrays)"
    )
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_config_too_large_to_be_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "lockwatch.toml").write_text("# padding\n" * 200_000)
    done = lockwatch(tmp_path, "ls", home=tmp_path)
    assert done.returncode == 2
    assert "more than the 256 KiB allowed" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@needs_root
def test_group_write_through_a_primary_group_is_someone_elses(
    tmp_path: Path, listener: Listener
) -> None:
    """Issue 47, item 10: a group named after the file's owner, with no members
    listed in /etc/group, but another account's primary group (`useradd -g`):
    that account can write the file, so it is not trusted. Real accounts: the
    owner (its own group, as `useradd -U` makes it) and one whose primary group
    that is, which appends a [remote] of its own to the config as itself."""
    from tests.adversarial.accounts import account, as_user, shared_dir

    with account() as owner, account(primary_group=owner.pw_name) as member, shared_dir() as top:
        configs = top.parent / "lwcfg"
        configs.mkdir(mode=0o755)
        config = configs / "lockwatch.toml"
        config.write_text("readonly = true\n")
        os.chown(config, owner.pw_uid, owner.pw_gid)
        config.chmod(0o664)
        token = root_token(tmp_path)
        as_user(member, ["sh", "-c", f"printf '{remote_table(listener.port, token)}' >> {config}"])
        done = lockwatch(configs, "ls", "--config", str(config), home=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == (
            f"lockwatch: {config}: not loaded: group {owner.pw_name} can write it (mode 0664)"
            f" (chmod go-w {config})"
        )
        assert listener.connections == 0 and b"root-s3cret" not in listener.received


def remote_table(port: int, token: Path) -> str:
    return f'[remote]\\nurls = ["http://127.0.0.1:{port}"]\\ntoken_file = "{token}"\\n'
