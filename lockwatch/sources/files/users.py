"""Who works on what a lock guards, for lock files that name no holder but
whose writer is known by its work: a `.git/*.lock` is held while a git process
works in that repository (`Lock.users`, read by `held_while_used` policies).

A git process is found by its name (`git`, `git-*`: receive-pack, remote
helpers, ...) and mapped to a repository the way git itself finds one, from
where it works: its cwd (commands that set up a repository chdir to the
worktree root, or into a bare repository), `-C`/`--git-dir`/`--work-tree` and
path arguments on its command line, and GIT_DIR, GIT_WORK_TREE, GIT_COMMON_DIR
and GIT_INDEX_FILE in its environment (clone's helpers, hooks' git commands).
Hooks and editors need no rule of their own: the git that runs them is at work.
Repositories are compared by the device and inode of their common git dir, so
linked worktrees (`.git/worktrees/<n>`), submodules (`.git/modules/<n>`),
symlinked paths and processes in another mount namespace all match.

"Nobody at work" is only said on evidence: where a git process could not be
read (another user's), /proc hides other users' processes (hidepid), there is
no /proc, or the lock is on a network filesystem (a git on another host is
invisible here), `users` stays None and the lock keeps its own rules.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace

from lockwatch.model.lock import Lock
from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.files.decoders import git, pacman
from lockwatch.sources.files.facts import facts_of, refiled
from lockwatch.sources.mounts import remote_devices

PROC = "/proc"
# Path arguments looked at per process: `git add` may name thousands.
MAX_ARGS = 32
# Environment variables naming where a git process works.
_GIT_ENV = (b"GIT_DIR", b"GIT_WORK_TREE", b"GIT_COMMON_DIR", b"GIT_INDEX_FILE")

# A repository: the device and inode of its common git dir.
RepoKey = tuple[int, int]


@lean_dataclass(frozen=True, slots=True)
class GitProcess:
    pid: int
    start_ticks: int
    repositories: frozenset[RepoKey]


@lean_dataclass(frozen=True, slots=True)
class GitProcesses:
    """Every git process this host shows, and whether it showed all of them."""

    processes: tuple[GitProcess, ...]
    # False when some process could not be read: then "nobody works there" is
    # not known, only "these do".
    complete: bool

    def users_of(self, repository: RepoKey) -> tuple[int, ...]:
        """Pids at work in `repository`, the longest-running first (the git
        command that runs the others)."""
        found = [p for p in self.processes if repository in p.repositories]
        return tuple(p.pid for p in sorted(found, key=lambda p: (p.start_ticks, p.pid)))


def attach_users(
    locks: Sequence[Lock],
    processes: Callable[[], GitProcesses | None] | None = None,
) -> list[Lock]:
    """`locks` with `users` filled in for those whose policy is held_while_used.
    `processes` gives the git processes (one /proc pass, which a caller making
    several calls at one moment may share); by default, a fresh pass."""
    # pacman's users are who has its file open, found with the kernel's word (its `explain`).
    wanted = [
        i
        for i, lock in enumerate(locks)
        if facts_of(lock).policy.held_while_used and lock.path and lock.format != pacman.FORMAT
    ]
    out = list(locks)
    if not wanted:
        return out
    scan = (processes or scan_git_processes)()
    remote = remote_devices() if scan is not None else frozenset()
    for i in wanted:
        lock = locks[i]
        users: tuple[int, ...] | None = None
        key = facts_of(lock).file_key
        on_remote = key is not None and key.device in remote
        if scan is not None and lock.path is not None and not on_remote:
            repository = repository_of(lock.path)
            if repository is not None:
                found = scan.users_of(repository)
                users = found if found or scan.complete else None
        out[i] = with_users(lock, users)
    return out


def with_users(lock: Lock, users: tuple[int, ...] | None) -> Lock:
    """`lock` with `users`, and a holder pid from them where the file names none
    (the verdict then drops "names no process"). Idempotent: a lock already
    given users gets them anew."""
    named = git.named_pid(lock.path) if lock.path is not None else None
    pid = named if named is not None else users[0] if users else None
    return refiled(lock, {"users": users}, holder=replace(lock.holder, pid=pid))


def repository_of(lock_path: str) -> RepoKey | None:
    """The repository a lock file in a git dir belongs to: the nearest git dir
    above it (a worktree's or submodule's), as its common dir."""
    place = git.anchor(lock_path)
    directory = os.path.dirname(lock_path)
    bound = place[0] if place is not None else "/"
    resolver = _Resolver("")
    while True:
        if _is_git_dir(directory):
            return resolver.key(resolver.common(directory))
        if directory == bound or len(directory) <= len(bound):
            break
        directory = os.path.dirname(directory)
    return resolver.key(bound) if place is not None else None


def scan_git_processes(proc: str = PROC) -> GitProcesses | None:
    """One pass over /proc; None where there is no /proc to read."""
    try:
        names = os.listdir(proc)
        own_mnt = os.readlink(f"{proc}/self/ns/mnt")
    except OSError:
        return None
    complete = not _hidden_processes(proc)
    found: list[GitProcess] = []
    resolvers: dict[str, _Resolver] = {}
    for name in names:
        if not name.isdigit():
            continue
        base = f"{proc}/{name}"
        try:
            with open(f"{base}/comm", "rb") as handle:
                comm = handle.read().rstrip(b"\n")
            if comm != b"git" and not comm.startswith(b"git-"):
                continue
            with open(f"{base}/stat", "rb") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(b")") + 2 :].split()
            if fields[0] in (b"Z", b"X"):
                continue  # exited: holds nothing, and its cwd is gone
            cwd = os.readlink(f"{base}/cwd")
            with open(f"{base}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
            with open(f"{base}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
            mnt = os.readlink(f"{base}/ns/mnt")
        except (FileNotFoundError, ProcessLookupError):
            continue  # gone since /proc was listed
        except (OSError, ValueError, IndexError):
            complete = False  # another user's: it may be at work anywhere
            continue
        # A process in another mount namespace (a container) names paths in
        # its own tree: look at them through its root.
        root = "" if mnt == own_mnt else f"{base}/root"
        resolver = resolvers.setdefault(root, _Resolver(root))
        repositories = {
            key
            for path in _work_paths(cwd, argv, environ)
            if (key := resolver.discover(path)) is not None
        }
        if repositories:
            found.append(GitProcess(int(name), int(fields[19]), frozenset(repositories)))
    return GitProcesses(tuple(found), complete)


def _work_paths(cwd: str, argv: list[bytes], environ: list[bytes]) -> list[str]:
    """Where a git process may work, as absolute paths in its own tree."""
    paths = [cwd]
    here = cwd
    args = [os.fsdecode(arg) for arg in argv[1 : 1 + MAX_ARGS] if arg]
    taking: str | None = None
    for arg in args:
        if taking == "-C":
            # `-C a -C b` is a/b; --git-dir and --work-tree are taken after it.
            here = os.path.join(here, arg)
            paths.append(here)
            taking = None
        elif taking is not None:
            paths.append(os.path.join(here, arg))
            taking = None
        elif arg in ("-C", "--git-dir", "--work-tree"):
            taking = arg
        elif arg.startswith(("--git-dir=", "--work-tree=")):
            paths.append(os.path.join(here, arg.partition("=")[2]))
        elif not arg.startswith("-"):
            # Subcommand arguments that name places: clone's target, add's paths.
            paths.append(os.path.join(cwd, arg))
    for entry in environ:
        key, _, value = entry.partition(b"=")
        if key in _GIT_ENV and value:
            paths.append(os.path.join(cwd, os.fsdecode(value)))
    return paths


class _Resolver:
    """Finds repositories as git does (setup.c), in one process's file tree:
    up from a path to a git dir or a `.git` (dir, or `gitdir:` file)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._found: dict[str, RepoKey | None] = {}

    def _real(self, path: str) -> str:
        return self.root + path

    def discover(self, path: str) -> RepoKey | None:
        directory = os.path.normpath(path)
        if not os.path.isdir(self._real(directory)):
            directory = os.path.dirname(directory)
        walked: list[str] = []
        result: RepoKey | None = None
        while True:
            if directory in self._found:
                result = self._found[directory]
                break
            walked.append(directory)
            git_dir = self._git_dir_at(directory)
            if git_dir is not None:
                result = self.key(self.common(git_dir))
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        for seen in walked:
            self._found[seen] = result
        return result

    def _git_dir_at(self, directory: str) -> str | None:
        if _is_git_dir(self._real(directory)):
            return directory
        dotgit = os.path.join(directory, ".git")
        real = self._real(dotgit)
        if os.path.isdir(real):
            return dotgit if _is_git_dir(real) else None
        try:
            with open(real, "rb") as handle:
                line = handle.read(4096).split(b"\n", 1)[0]
        except OSError:
            return None
        if not line.startswith(b"gitdir: "):
            return None
        target = os.path.join(directory, os.fsdecode(line[len(b"gitdir: ") :].strip()))
        return target if _is_git_dir(self._real(target)) else None

    def common(self, git_dir: str) -> str:
        """A worktree's git dir names its repository's in `commondir`."""
        try:
            with open(self._real(os.path.join(git_dir, "commondir")), "rb") as handle:
                common = os.fsdecode(handle.read(4096).strip())
        except OSError:
            return git_dir
        return os.path.normpath(os.path.join(git_dir, common)) if common else git_dir

    def key(self, path: str) -> RepoKey | None:
        try:
            st = os.stat(self._real(path))
        except OSError:
            return None
        return (st.st_dev, st.st_ino)


def _is_git_dir(path: str) -> bool:
    """HEAD, and objects/ and refs/ here or in the common dir (setup.c
    is_git_directory, without validating HEAD's content)."""
    join = os.path.join
    if not os.path.isfile(join(path, "HEAD")):
        return False
    if os.path.isfile(join(path, "commondir")):
        return True
    return os.path.isdir(join(path, "objects")) and os.path.isdir(join(path, "refs"))


def _hidden_processes(proc: str) -> bool:
    """Whether /proc hides other users' processes from us (mounted hidepid=1/2)."""
    if os.geteuid() == 0:
        return False
    try:
        with open(f"{proc}/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return True
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and fields[4] == proc and "-" in fields:
            options = fields[-1].split(",")
            for option in options:
                key, _, value = option.partition("=")
                if key == "hidepid" and value not in ("0", "off"):
                    return True
    return False
