"""Which mounted filesystems are network ones, from mountinfo: a lock there may
be held from another host, where the local /proc/locks and /proc cannot see it.
Read by the kernel evidence (nothing is asked about such files) and by the
users of a work tree (nobody seen using it proves nothing there), and by the
kernel source (a lock on such a file is on no file's row). Below both."""

from __future__ import annotations

from collections.abc import Iterator

# Filesystems whose locks may be held from other hosts: the local /proc/locks
# does not show those, so it cannot say that nobody holds a file there.
REMOTE_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "ocfs2",
        "gfs2",
        "9p",
        "afs",
        "beegfs",
        "fuse.sshfs",
        "fuse.glusterfs",
        "fuse.ceph",
        "fuse.s3fs",
        "fuse.rclone",
    }
)


def _mounts(mountinfo: str) -> Iterator[tuple[str, list[str]]]:
    """Each mount's filesystem type and fields, from mountinfo (none if unreadable)."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return
    for line in lines:
        # id parent major:minor root mountpoint options [optional...] - fstype source super
        fields = line.split()
        try:
            fstype = fields[fields.index("-") + 1]
        except (ValueError, IndexError):
            continue
        yield fstype, fields


def remote_devices(mountinfo: str = "/proc/self/mountinfo") -> frozenset[str]:
    """Devices ("major:minor") of network filesystems, from mountinfo."""
    return frozenset(
        fields[2]
        for fstype, fields in _mounts(mountinfo)
        if fstype in REMOTE_FILESYSTEMS and len(fields) > 2
    )


# Filesystems that hold no lock files, only the kernel's own views (processes,
# devices, cgroups, tracing): a scan never walks into one nobody named. Walked,
# /proc alone is hundreds of thousands of entries and "Permission denied" lines.
PSEUDO_FILESYSTEMS = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "debugfs",
        "tracefs",
        "securityfs",
        "pstore",
        "bpf",
        "configfs",
        "fusectl",
        "mqueue",
        "hugetlbfs",
        "autofs",
        "binfmt_misc",
        "efivarfs",
        "rpc_pipefs",
        "nsfs",
        "selinuxfs",
        "fuse.lxcfs",
        "fuse.gvfsd-fuse",
        "fuse.portal",
    }
)


def _unescape(field: str) -> str:
    r"""A mountinfo path: space, tab, newline and backslash are written as octal (`\040`)."""
    if "\\" not in field:
        return field
    out = []
    index = 0
    while index < len(field):
        char = field[index]
        octal = field[index + 1 : index + 4]
        if char == "\\" and len(octal) == 3 and all(c in "01234567" for c in octal):
            out.append(chr(int(octal, 8)))
            index += 4
        else:
            out.append(char)
            index += 1
    return "".join(out)


def pseudo_mounts(mountinfo: str = "/proc/self/mountinfo") -> frozenset[str]:
    """Mount points of pseudo filesystems (PSEUDO_FILESYSTEMS), from mountinfo."""
    return frozenset(
        _unescape(fields[4])
        for fstype, fields in _mounts(mountinfo)
        if fstype in PSEUDO_FILESYSTEMS and len(fields) > 4
    )
