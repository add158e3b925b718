"""ZooKeeper lock ids, built and parsed here and nowhere else:
`zk:<host:port[,host:port...]>[<chroot>]:<znode path>`.

The server part is the connect string the run was given (its chroot, if any,
with it), so an action reconnects where the lock was read; the znode path is
under that chroot, as the recipes name it.
"""

from __future__ import annotations

from lockwatch.model.lazyre import lazy_compile

ZK = "zk"
# kazoo's Semaphore(path) queues its callers on a Lock at path + this (`lock_path`):
# what `why`'s messages and a poll's recipes both know (here: every start loads it).
SEMAPHORE_QUEUE = "-__lock__"

# Hosts end at their last `:port` before the chroot (`/...`, no colon) or the path.
_ZK = lazy_compile(r"zk:(?P<server>[^/]+?:\d+(?:/[^:]*)?):(?P<path>/.*)")


def zk_id(server: str, path: str) -> str:
    return f"{ZK}:{server}:{path}"


def parse_zk(lock_id: str) -> tuple[str, str] | None:
    """(server, znode path) of a ZooKeeper lock id; None: not one."""
    match = _ZK.fullmatch(lock_id)
    return None if match is None else (match["server"], match["path"])
