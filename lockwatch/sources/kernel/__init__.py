"""The kernel source: /proc/locks, the processes holding and awaiting each lock."""
