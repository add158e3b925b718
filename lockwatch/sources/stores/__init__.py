"""What Redis and etcd locks share: a key held in a store, its facts and rules."""
