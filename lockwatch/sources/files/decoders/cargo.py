"""cargo's locks: empty files held with flock while cargo works.

cargo (src/cargo/util/flock.rs, config's acquire_package_cache_lock) flocks
`$CARGO_HOME/.package-cache` while it updates the registry index or downloads
crates (newer cargo also `.package-cache-mutate`, shared or exclusive), and
`target/<profile>/.cargo-lock` while it builds there. A second cargo says
"Blocking waiting for file lock on package cache" (or "on build directory")
and waits in the kernel. The files stay: only the flock says whether they are
held. `Cargo.lock` is a dependency lockfile, never a lock.
"""

from __future__ import annotations

from lockwatch.model.lock import Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "cargo"
POLICY = StalenessPolicy(kernel_sentinel=True, kernel_only=True, sentinel_mtime_only=True)
MOVABLE = False
WHAT = "a cargo lock (held with flock while cargo works; the file always stays)"
_NAMES = {
    ".package-cache": "cargo's package cache lock: held while cargo updates the registry index"
    ' or downloads crates (another cargo: "Blocking waiting for file lock on package cache")',
    ".package-cache-mutate": "cargo's package cache lock (mutate): held while cargo changes the"
    " package cache",
    ".cargo-lock": "cargo's build directory lock: held while cargo builds there (another cargo:"
    ' "Blocking waiting for file lock on build directory")',
}

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("file",)
# The only entries `read` may claim (base.Claims): its lock names.
CLAIMS = Claims(names=frozenset(_NAMES))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def wants(path: str, kind: str) -> bool:
    return kind == "file" and path.rpartition("/")[2] in _NAMES


def read(file: LockFile) -> Lock | None:
    words = _NAMES.get(file.name)
    if file.kind != "file" or words is None or file.raw:
        return None
    return _file_lock(
        file,
        name=f"{file.parents(1)[0] or '/'}/{file.name}",
        content=None,
        notes=(Reason("cargo_lock", words),),
    )


handover = no_handover  # held by a kernel lock, not by content


refresh = no_refresh
