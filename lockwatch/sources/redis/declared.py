"""What every run asks of the redis source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lockwatch.sources.declaring import Repeatable, ServerDeclared, TargetOption
from lockwatch.sources.redis import ids
from lockwatch.sources.secrets import InArguments, secret_option, url_passwords

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator

# --redis's and --redlock's URLs may carry a password: hidden from `ps` as soon
# as they are parsed.
_INSTEAD = "REDISCLI_AUTH, or password_file in the config's [redis] table"
IN_ARGUMENTS = InArguments("--redis", url_passwords, _INSTEAD)
REDLOCK_IN_ARGUMENTS = InArguments("--redlock", url_passwords, _INSTEAD)


class RedisDeclared(ServerDeclared):
    # Its config table is its name.
    name = "redis"
    label = "rds"
    id_prefix = ids.REDIS
    summary = (
        "Redis locks (redis-py, python-redis-lock, Redlock, Redisson, redis-semaphore,"
        " portalocker): tokens, TTLs, waiters"
    )
    title = "Redis"
    asking = ("redlock_groups",)
    # The option naming its servers: its listing's and the action commands'.
    target_option = TargetOption("--redis", "redis_urls", IN_ARGUMENTS, "URL")
    servers_help = (
        "A Redis server to read lock keys from: redis://, rediss:// or unix://"
        " (repeatable; password from the URL, REDISCLI_AUTH or redis.password_file)."
    )
    target_help = "The Redis server (with its password) a redis: TARGET lives on (repeatable)."
    repeatable = (
        Repeatable(
            "--redis-pattern",
            "redis_patterns",
            "GLOB",
            "SCAN pattern for lock keys (repeatable) [default: lock:*, redlock:*, *lock, *Lock].",
        ),
    )

    def own_options(self) -> Sequence[Decorator]:
        return [
            secret_option(
                "--redlock",
                "redlock_groups",
                carries=REDLOCK_IN_ARGUMENTS,
                multiple=True,
                metavar="URL,URL,...",
                help="The servers of one Redlock group, comma-separated: each lock shown once,"
                " with how many servers hold it (repeatable).",
            ),
        ]


DECLARED = RedisDeclared()
