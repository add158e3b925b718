"""The mysql source: MySQL and MariaDB named locks, InnoDB lock waits and metadata-lock queues."""
