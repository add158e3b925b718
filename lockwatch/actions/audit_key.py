"""The audit log's key: an HMAC secret kept apart from the log.

Whoever can write the log can edit a record and recompute its sha256 and the
chain after it; without this key they cannot recompute the records' MACs. So
the key lives elsewhere than the log (by default the user config directory, the
log being in the user state directory), mode 0600, and is never written to the
log: records carry only its id, a fingerprint that does not reveal it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

# A key file holds at least this many bytes of secret (lockwatch writes 32, as hex).
MIN_SECRET_BYTES = 16
# Bounded: a key file is a line, never a log or a device to read forever.
MAX_KEY_FILE_BYTES = 4096
MAC_PREFIX = "hmac-sha256:"


class AuditKeyError(Exception):
    """The key cannot be read or made; the message says which file and why."""


class UnsafeKey(AuditKeyError):
    """The key is there, but others could read or change it: no record is keyed
    with it and no log verified with it until it is closed (the message says how)."""


def default_key_path() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir("lockwatch")) / "audit.key"


def key_path(given: Path | None, configured: str | None) -> Path:
    """The key in force: `--audit-key`, else the config's `actions.audit_key`, else
    the user config directory's."""
    if given is not None:
        return given
    return Path(configured) if configured else default_key_path()


def key_beside_log(key: Path, log: Path) -> str | None:
    """Why the key is no key, when it sits in the audit log's own directory (or
    under it): whoever can write the log can then most likely read the key, and
    forge records the keyed chain would vouch for. None when it is kept apart."""
    key_dir = os.path.realpath(key.parent)
    log_dir = os.path.realpath(log.parent)
    if key_dir != log_dir and not key_dir.startswith(log_dir.rstrip("/") + "/"):
        return None
    return (
        f"warning: the audit key {key} is kept beside the audit log {log}: whoever can"
        " write the log can likely read the key and forge records; keep it elsewhere"
        " (--audit-key, or audit_key in the config's [actions])"
    )


@dataclass(frozen=True)
class AuditKey:
    path: Path
    secret: bytes = field(default=b"", repr=False)

    @property
    def id(self) -> str:
        """What records name the key by: a fingerprint, not the secret."""
        return hashlib.sha256(b"lockwatch-audit-key:" + self.secret).hexdigest()[:16]

    def mac(self, data: bytes) -> str:
        return MAC_PREFIX + hmac.new(self.secret, data, hashlib.sha256).hexdigest()

    def check(self, data: bytes, mac: object) -> bool:
        return isinstance(mac, str) and hmac.compare_digest(self.mac(data), mac)

    @staticmethod
    def load(path: Path) -> AuditKey:
        """The key at `path`; AuditKeyError if it is missing, unreadable or too
        short, UnsafeKey if someone besides its owner (you or root) could read or
        change it: refused as ssh refuses such a private key, never quietly mended."""
        from lockwatch.trusted import SECRET, Refused, read_file

        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                raise AuditKeyError(f"cannot read the audit key {path}: it is a symlink")
            data = read_file(path, MAX_KEY_FILE_BYTES, SECRET)
        except FileNotFoundError:
            raise AuditKeyError(f"no audit key at {path}") from None
        except Refused as exc:
            if exc.untrusted:
                raise UnsafeKey(f"the audit key {path}: {exc.why}") from None
            raise AuditKeyError(f"the audit key {path} is not a key: {exc.why}") from None
        except OSError as exc:
            raise AuditKeyError(f"cannot read the audit key {path}: {exc.strerror}") from exc
        secret = data.strip()
        if len(secret) < MIN_SECRET_BYTES:
            raise AuditKeyError(
                f"the audit key {path} is not a key: it must hold {MIN_SECRET_BYTES} to"
                f" {MAX_KEY_FILE_BYTES} bytes"
            )
        return AuditKey(path, secret)

    @staticmethod
    def load_or_create(path: Path) -> AuditKey:
        """The key at `path`, made (0600, its directory 0700) if there is none yet.
        Made whole in a temporary file and linked into place, so a second
        lockwatch making it at the same moment reads a whole key, never half."""
        try:
            return AuditKey.load(path)
        except UnsafeKey:
            raise
        except AuditKeyError:
            pass
        if os.path.lexists(path):
            return AuditKey.load(path)  # there but unusable: say why
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, secrets.token_hex(32).encode() + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temp, path)
            except FileExistsError:
                pass  # someone else made it first: theirs is the key
            finally:
                os.unlink(temp)
            directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except OSError as exc:
            raise AuditKeyError(f"cannot make the audit key {path}: {exc.strerror}") from exc
        return AuditKey.load(path)


# -- which logs a key has keyed ---------------------------------------------------
#
# Stripping every MAC from a keyed log and re-chaining it leaves a log that looks
# like one written before keys existed. The key's directory, which the log's
# writers need not be able to write, remembers each log the key started keying
# and from which record on, so such a rewrite is caught.


def registry_path(key: AuditKey) -> Path:
    return key.path.with_name(key.path.name + ".logs")


def register(key: AuditKey, log: Path, since: int) -> None:
    """Note that `log` is keyed with `key` from record `since` on (best effort:
    a key directory lockwatch may not write only loses this second check)."""
    line = json.dumps({"log": os.path.realpath(log), "since": since, "key_id": key.id})
    from lockwatch.trusted import open_own

    with contextlib.suppress(OSError):
        fd, _ = open_own(registry_path(key), os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line.encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)


def keyed_since(key: AuditKey, log: Path) -> int | None:
    """From which record on `log` was keyed with `key`, if the key's directory says."""
    real = os.path.realpath(log)
    found: list[int] = []
    from lockwatch.trusted import MIB, open_file

    # Bounded, and never a FIFO waited on.
    with contextlib.suppress(OSError), open_file(registry_path(key), 16 * MIB) as handle:
        for raw in handle:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                entry = json.loads(raw)
                since = entry.get("since")
                ours = entry.get("log") == real and entry.get("key_id") == key.id
                if ours and isinstance(since, int) and not isinstance(since, bool) and since > 0:
                    found.append(since)
    # The latest word: a log moved aside and started afresh is keyed from 1 again.
    return found[-1] if found else None
