"""What the tools that lock files say when they find a lock taken, and what
their docs advise: apt and dpkg, git, SQLite, Terraform, flock(1),
lockfile-progs, and plain paths. Pure: text in, clues out (`lockwatch why`).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable

from lockwatch.model.clues import Clue, ClueKind
from lockwatch.model.lazyre import lazy_compile

SOURCE = "file"

DPKG_FRONTEND = "/var/lib/dpkg/lock-frontend"
DPKG_LOCK = "/var/lib/dpkg/lock"

DPKG_ADVICE = (
    "apt and dpkg hold their locks with fcntl: the kernel frees them when the holder"
    " exits, so never delete the lock files; if a run died mid-install, finish it"
    " with `sudo dpkg --configure -a`"
)
GIT_ADVICE = (
    "git: remove {path} only when no git process runs in that repository"
    " (git's own words: 'remove the file manually to continue')"
)
SQLITE_ADVICE = (
    "SQLite's message names no file: run `lockwatch why PATH` on the database file"
    " to see who holds its locks (fcntl byte-range locks)"
)
SQLITE_HELD = (
    "SQLite: a writer holds its fcntl locks until its transaction ends; let others"
    " wait for it with a busy timeout (PRAGMA busy_timeout) rather than failing at once"
)
TERRAFORM_ADVICE = (
    "Terraform: `terraform force-unlock {id}` only when the run that took it"
    " (Who, Created) is gone; it does not stop a run that still works"
)
FLOCK_ADVICE = (
    "flock(1) holds a kernel lock: it is released when its holder exits; deleting"
    " the file does not release it"
)
LOCKFILE_ADVICE = (
    "lockfile-progs: a lock its holder stopped touching (lockfile-touch) is stale"
    " after 5 minutes; `lockfile-remove {file}` when its holder is gone"
)

# A file that is not a lock file: the kernel source's locks on it are its story.
KERNEL_WORD = (("kernel", True),)

# apt: "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process
# 1234 (apt-get)", "... - open (11: Resource temporarily unavailable)".
_APT_LOCK = lazy_compile(
    r"Could not get lock (?P<path>/\S+?)(?:\.\s|\s+-\s|\.?$)"
    r"(?:[^\n]*?held by process (?P<pid>\d+)(?: \((?P<command>[^)\n]+)\))?)?",
    re.MULTILINE,
)
# apt run by a user who may not open it: "E: Could not open lock file
# /var/lib/dpkg/lock-frontend - open (13: Permission denied)".
_APT_OPEN = lazy_compile(r"Could not open lock file (?P<path>/\S+?)(?:\s+-\s|\.?$)", re.MULTILINE)
# apt: "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend),
# is another process using it?"; "E: Unable to lock the administration directory
# (/var/lib/dpkg/), is another process using it?"
_APT_ACQUIRE = lazy_compile(r"Unable to acquire the dpkg frontend lock \((?P<path>/[^)\s]+)\)")
_APT_ADMIN = lazy_compile(r"Unable to lock the administration directory \((?P<dir>/[^)\s]+)\)")
# dpkg: "dpkg: error: dpkg frontend lock was locked by another process with pid 1234"
_DPKG_FRONTEND = lazy_compile(
    r"dpkg frontend lock (?:was|is) locked by another process(?: with pid (?P<pid>\d+))?"
)
# dpkg: "dpkg: error: dpkg status database is locked by another process"
_DPKG_STATUS = lazy_compile(r"dpkg status database is locked by another process")
_DPKG_INTERRUPTED = lazy_compile(r"dpkg was interrupted")

# git: "fatal: Unable to create '/srv/app/.git/index.lock': File exists."
_GIT_CREATE = lazy_compile(r"Unable to create '(?P<path>[^'\n]+\.lock)': File exists")
# git: "error: could not lock config file .git/config: File exists"
_GIT_CONFIG = lazy_compile(r"could not lock config file (?P<path>\S+?): File exists")

_SQLITE_BUSY = lazy_compile(r"(?<!status )database (?:table )?is locked|SQLITE_BUSY", re.IGNORECASE)
_DATABASE_PATH = lazy_compile(
    r"""(?<![\w/])(?P<path>(?:\.{0,2}/)?[^\s'"():,]+\.(?:db|sqlite3?))\b"""
)

# Terraform's "Lock Info:" block.
_TF_BLOCK = lazy_compile(r"Lock Info:")
_TF_ID = lazy_compile(r"^\s*ID:\s+(?P<id>\S+)\s*$", re.MULTILINE)
_TF_PATH = lazy_compile(r"^\s*Path:\s+(?P<path>\S+)\s*$", re.MULTILINE)

_FLOCK_SAYS = lazy_compile(r"flock: (?:failed to get lock|timeout while waiting to get lock)")
# flock(1)'s options that take a value, as separate words.
_FLOCK_VALUED = {"-w", "--wait", "--timeout", "-E", "--conflict-exit-code"}
_LOCKFILE_VALUED = {"-r", "--retry", "-l", "--lock-name"}

# Absolute paths of lock files anywhere in the text (quoted or not).
_LOCK_PATH = lazy_compile(r"""(?<![\w/])(?P<path>/[^\s'"`():,;]+?\.(?:lock|pid))(?![\w.])""")


def clues(text: str, lock_name: Callable[[str], bool]) -> list[Clue]:
    """What `text` names of lock files. `lock_name(path)`: whether a path is
    named like a lock file (a plain path typed alone)."""
    found: list[Clue] = []
    found += _apt(text)
    found += _git(text)
    found += _terraform(text)
    found += _flock(text)
    found += _lockfile(text)
    found += _sqlite(text)
    taken = {clue.value for clue in found if clue.kind is ClueKind.PATH}
    for match in _LOCK_PATH.finditer(text):
        path = match.group("path")
        if path not in taken:
            taken.add(path)
            found.append(Clue(ClueKind.PATH, path, SOURCE))
    word = text.strip()
    if word and not found and not any(ch.isspace() for ch in word):
        # A path typed alone: a lock file, or a file locks are taken on.
        named = lock_name(word)
        found.append(
            Clue(ClueKind.PATH, word, SOURCE, lock_file=named, options=() if named else KERNEL_WORD)
        )
    return found


def _apt(text: str) -> list[Clue]:
    found = []

    def dpkg(path: str, pid: str | None = None, command: str | None = None) -> None:
        tool = "apt" if "apt" in (command or "") or "apt" in text[:200].lower() else "dpkg"
        found.append(Clue(ClueKind.PATH, path, SOURCE, tool, DPKG_ADVICE))
        if pid is not None:
            found.append(Clue(ClueKind.PID, pid, SOURCE, tool, DPKG_ADVICE, command=command))

    for match in _APT_LOCK.finditer(text):
        dpkg(match.group("path"), match.group("pid"), match.group("command"))
    for match in (*_APT_OPEN.finditer(text), *_APT_ACQUIRE.finditer(text)):
        dpkg(match.group("path"))
    for match in _APT_ADMIN.finditer(text):
        dpkg(posixpath.join(match.group("dir"), "lock"))
    for match in _DPKG_FRONTEND.finditer(text):
        dpkg(DPKG_FRONTEND, match.group("pid"))
    if _DPKG_STATUS.search(text):
        dpkg(DPKG_LOCK)
    if _DPKG_INTERRUPTED.search(text):
        found.append(Clue(ClueKind.HINT, "dpkg_interrupted", SOURCE, "dpkg", DPKG_ADVICE))
    return found


def _git(text: str) -> list[Clue]:
    found = []
    for match in _GIT_CREATE.finditer(text):
        path = match.group("path")
        found.append(Clue(ClueKind.PATH, path, SOURCE, "git", GIT_ADVICE.format(path=path)))
    for match in _GIT_CONFIG.finditer(text):
        path = match.group("path") + ".lock"
        found.append(Clue(ClueKind.PATH, path, SOURCE, "git", GIT_ADVICE.format(path=path)))
    return found


def terraform_lock_file(state: str) -> str:
    """The local backend's lock info file beside state file `state`."""
    head, tail = posixpath.split(state)
    return posixpath.join(head, f".{tail}.lock.info")


def _terraform(text: str) -> list[Clue]:
    block = _TF_BLOCK.search(text)
    if block is None:
        return []
    rest = text[block.end() :]
    found = []
    ident = _TF_ID.search(rest)
    advice = TERRAFORM_ADVICE.format(id=ident.group("id") if ident else "ID")
    path = _TF_PATH.search(rest)
    if path is not None:
        # The local backend's lock; a remote backend's Path is its state's key,
        # and its lock lives on the backend (not a file here).
        lock_file = terraform_lock_file(path.group("path"))
        found.append(Clue(ClueKind.PATH, lock_file, SOURCE, "terraform", advice))
    if ident is not None:
        found.append(Clue(ClueKind.TOOL_ID, ident.group("id"), SOURCE, "terraform", advice))
    return found


def _words_after(text: str, command: str) -> list[list[str]]:
    """The arguments of every `command ...` line in `text` (shell words)."""
    runs = []
    for line in text.splitlines():
        try:
            words = shlex.split(line, comments=False)
        except ValueError:
            words = line.split()
        for at, word in enumerate(words):
            if posixpath.basename(word) == command:
                runs.append(words[at + 1 :])
    return runs


def _first_operand(words: list[str], valued: set[str]) -> str | None:
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in valued:
            skip = True
            continue
        if word.startswith("-"):
            continue
        return word
    return None


def _flock(text: str) -> list[Clue]:
    found = []
    for words in _words_after(text, "flock"):
        file = _first_operand(words, _FLOCK_VALUED)
        if file is not None and not file.isdigit():  # a number: a file descriptor
            found.append(Clue(ClueKind.PATH, file, SOURCE, "flock", FLOCK_ADVICE))
    if not found and _FLOCK_SAYS.search(text):
        # flock(1) names no file: the command line does.
        found.append(Clue(ClueKind.HINT, "flock_busy", SOURCE, "flock", FLOCK_ADVICE))
    return found


def _lockfile(text: str) -> list[Clue]:
    found = []
    for command in ("lockfile-create", "lockfile-check", "lockfile-touch"):
        for words in _words_after(text, command):
            named = "-l" in words or "--lock-name" in words
            file = _first_operand(words, _LOCKFILE_VALUED)
            if file is None:
                continue
            path = file if named else f"{file}.lock"
            advice = LOCKFILE_ADVICE.format(file=shlex.quote(file))
            found.append(Clue(ClueKind.PATH, path, SOURCE, "lockfile-progs", advice))
    return found


def _sqlite(text: str) -> list[Clue]:
    if _SQLITE_BUSY.search(text) is None:
        return []
    found = [
        Clue(
            ClueKind.PATH,
            match.group("path"),
            SOURCE,
            "sqlite",
            SQLITE_HELD,
            lock_file=False,
            options=KERNEL_WORD,
        )
        for match in _DATABASE_PATH.finditer(text)
    ]
    if not found:
        found.append(Clue(ClueKind.HINT, "sqlite_busy", SOURCE, "sqlite", SQLITE_ADVICE))
    return found
