"""Other hosts' locks, through their `lockwatch serve` (`--remote URL`)."""
