"""The etcd source: etcd v3 locks (the concurrency mutex) through the JSON gateway."""
