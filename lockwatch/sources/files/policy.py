"""A lock file format's staleness rules, declared by its decoder as data, and
the protocols the config may declare a path's locks to follow."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from lockwatch.model.slots import lean_dataclass


@lean_dataclass(frozen=True, slots=True)
class StalenessPolicy:
    """A format's own staleness rules, declared by its decoder as data.

    Keeping the rules as data lets one generic verdict function serve every
    format, so a new format is a new decoder and nothing else.

    The flags by the rule of `sources/files/rules.py` that reads them (fields keep
    their order: recordings and decoders build policies by it):
      kernel_evidence_held, kernel_unheld: kernel_sentinel, kernel_pidfile
        (and sentinel_mtime_only, read where the evidence is attached);
      kernel_only_unknown: kernel_only;
      held_while_used: held_while_used, users_grace, users_label;
      holder_checks: pid_liveness, time_by_writer;
      age_limit: max_age, max_age_inclusive, foreign_max_age;
      heartbeat: heartbeat, heartbeat_late_fraction;
      lease_expiry: expiry_grace;
      waiter: waiter;
      undecided, foreign_unknown: holder_checks (unknown); sentinel_unproven:
        kernel_unheld, pid_or_sentinel; declared: kernel_unheld, pid_or_sentinel;
        expiry_code: lease_expiry.
    """

    # A dead holder pid on this host makes the lock stale (also a recycled pid).
    pid_liveness: bool = False
    # Stale once now - acquired_at exceeds this many seconds.
    max_age: float | None = None
    # The recorded time is the writer's, not the acquirer's (a file rewritten by
    # whoever touched it last): a holder process started after it is no sign
    # that its pid was recycled.
    time_by_writer: bool = False
    # gitclaw counts the boundary itself as stale (age >= max_age).
    max_age_inclusive: bool = False
    # A lock written by another host: stale past this age; its pid is never checked.
    foreign_max_age: float | None = None
    # Stale iff now - heartbeat_at > ttl_seconds.
    heartbeat: bool = False
    # Past `Lock.expires_at`, the tool breaks the lock after this many seconds.
    expiry_grace: float = 0.0
    # Past this fraction of the ttl without a heartbeat, say it is late.
    heartbeat_late_fraction: float = 1 / 3
    # The file is only a sentinel for a kernel lock (flock, fcntl): whoever holds
    # that lock holds it, and with nobody holding it, it is free, whatever pid
    # it still names.
    kernel_sentinel: bool = False
    # A pid file that, once lockwatch has seen a kernel lock on it, follows the
    # kernel: released while its process lives on, it is free.
    kernel_pidfile: bool = False
    # A bare sentinel's mtime says nothing about when its kernel lock was taken
    # (every acquirer, and filelock's waiters, open it; some truncate it): where
    # the kernel decides (the files source's with_evidence), the lock's age is unknown.
    sentinel_mtime_only: bool = False
    # Its tool decides by the kernel lock alone (a file that is only ever a
    # sentinel, never a lock by its presence): without the kernel's word it is
    # unknown, not the file's own rules.
    kernel_only: bool = False
    # Held exactly while some process works on what it guards (`Lock.users`): a
    # lock file with no pid, whose writer is known by what it works on (git).
    # Past `users_grace` seconds of age with nobody at work, it is stale.
    held_while_used: bool = False
    users_grace: float = 5.0
    # Who would be at work, for the message: "no git process in this repository".
    users_label: str = "process works on what it guards"
    # The file records a waiter, not a holder (little-loops' --queue entries):
    # `waiting` while its pid lives, stale once it is gone.
    waiter: bool = False
    # Nothing here can tell whether it is held (a file that is no lock; an
    # existence lock whose staleness rule its caller keeps): unknown, and the
    # decoder's first note says why (issue 33).
    undecided: bool = False
    # Another host's lock is unknown, not active: its tool checks the pid on the
    # writer's own host only (Mercurial, vim).
    foreign_unknown: bool = False
    # An empty file is a kernel lock's sentinel and an existence lock alike (npm's
    # `lockfile`: created O_EXCL, then closed): with no kernel lock held on it and
    # nobody having it open, it is free only where the kernel was seen holding it.
    # A bare pid is a pid file and a sentinel alike (portalocker writes its pid):
    # active by its live pid, with the sentinel's reading named (issue 42).
    sentinel_unproven: bool = False
    # The reason code of `lease_expiry`: a lease its holder renews
    # (heartbeat_expired), or a record's own deadline (expired).
    expiry_code: str = "heartbeat_expired"
    # What the config declares the lock's path to be where `sentinel_unproven`
    # leaves it open ([[protocols]]): KERNEL (a kernel lock's sentinel) or
    # EXISTENCE (held while it exists); None: nothing declared.
    declared: str | None = None


# The protocols a path's locks can be declared to follow (`declare`).
KERNEL, EXISTENCE = "kernel", "existence"
PROTOCOLS = (KERNEL, EXISTENCE)


@lru_cache(maxsize=64)
def declare(policy: StalenessPolicy, protocol: str) -> StalenessPolicy:
    """`policy` as the config declares its path's locks: a kernel lock's sentinel
    (free once no kernel lock is held on it, whatever pid it names, and unknown
    where the kernel cannot be asked) or an existence lock (held while it exists,
    a pid in it checked as a pid file's). Only a policy that leaves the reading
    open (`sentinel_unproven`) is changed: a format's own rules stay its own."""
    if not policy.sentinel_unproven or protocol not in PROTOCOLS:
        return policy
    sentinel = protocol == KERNEL
    return replace(
        policy,
        kernel_sentinel=sentinel,
        kernel_only=sentinel,
        kernel_pidfile=False,
        sentinel_mtime_only=sentinel,
        declared=protocol,
    )


NO_POLICY = StalenessPolicy()
