"""Incident files: a snapshot written as JSON and Markdown side by side.

Each file is written to a temporary name in the same directory and then linked
into place, so a reader never sees half a report and an existing file is never
replaced. Files are private to their owner (0600): an incident names hosts,
users and sometimes queries.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from datetime import UTC
from pathlib import Path

from lockwatch.model.incident import Incident, to_json, to_markdown

PREFIX = "lockwatch-incident-"
MODE = 0o600
# How many same-second reports may share a directory before we give up.
MAX_SUFFIX = 1000


def file_stem(incident: Incident) -> str:
    """`lockwatch-incident-20261121T120000Z`: the snapshot's time in UTC."""
    return PREFIX + incident.at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def default_directory() -> Path:
    """Where `e` writes when not told: the user's state directory, not the
    current one (which may be a git checkout the report must not land in)."""
    from platformdirs import user_state_dir

    return Path(user_state_dir("lockwatch")) / "incidents"


def write_incident(incident: Incident, directory: Path) -> tuple[Path, Path]:
    """Write `<stem>.json` and `<stem>.md` into `directory` (made, private, if
    missing); `<stem>-2`, `-3`… when a report of that second is already there.
    Returns both paths. Raises OSError (with the path in it) when the directory
    cannot take them; nothing is left behind then."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    json_bytes = to_json(incident)
    markdown = to_markdown(incident).encode("utf-8", "backslashreplace")
    base = file_stem(incident)
    for n in range(1, MAX_SUFFIX + 1):
        stem = base if n == 1 else f"{base}-{n}"
        json_path = directory / f"{stem}.json"
        md_path = directory / f"{stem}.md"
        if os.path.lexists(json_path) or os.path.lexists(md_path):
            continue
        try:
            _publish(json_bytes, json_path)
        except FileExistsError:
            continue  # somebody took the name since we looked
        try:
            _publish(markdown, md_path)
        except FileExistsError:
            json_path.unlink(missing_ok=True)
            continue
        except BaseException:
            json_path.unlink(missing_ok=True)
            raise
        return json_path, md_path
    raise FileExistsError(
        errno.EEXIST, f"{MAX_SUFFIX} incident reports of this second already exist", str(directory)
    )


def _publish(data: bytes, path: Path) -> None:
    """`data` at `path`, complete or not at all; FileExistsError if `path` exists."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), MODE)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        try:
            # A hard link never replaces an existing file, unlike rename().
            os.link(temp, path)
        except FileExistsError:
            raise
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            # A filesystem without hard links: claim the name, then rename onto it.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, MODE))
            try:
                os.replace(temp, path)
            except BaseException:
                path.unlink(missing_ok=True)
                raise
    finally:
        # Gone already when it was renamed into place.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
