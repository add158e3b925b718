"""Collectors: they read the world and produce model records, never verdicts."""
