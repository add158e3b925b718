"""The redis source: lock keys in Redis servers and Redlock groups."""
