"""A kazoo recipe held (or queued for) in a process of its own, for tests that
kill it: `holder.py CONNECT RECIPE PATH IDENTIFIER [SESSION_TIMEOUT]`, RECIPE
one of lock, rlock, wlock, semaphore. Prints `ready` once it holds the lock or
its node is queued, then sleeps until killed."""

from __future__ import annotations

import sys
import threading
import time

from kazoo.client import KazooClient


def main() -> None:
    connect, recipe, path, identifier = sys.argv[1:5]
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 30.0
    client = KazooClient(connect, timeout=timeout)
    client.start(timeout=30)
    lock = {
        "lock": client.Lock,
        "rlock": client.ReadLock,
        "wlock": client.WriteLock,
        "semaphore": client.Semaphore,
    }[recipe](path, identifier)
    held = lock.acquire(blocking=False)
    if not held:
        # Queued: its node stays while it waits.
        threading.Thread(target=lock.acquire, daemon=True).start()
        while not any(
            identifier.encode() in client.get(f"{path}/{c}")[0] for c in client.get_children(path)
        ):
            time.sleep(0.01)
    print("ready", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
