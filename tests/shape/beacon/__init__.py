"""Beacon: a made-up lease service's source, written as a contributor would
write one for lockwatch, and the proof of the shape (issue 43).

This package is a whole source: options (`--beacon URL`, `--beacon-prefix`), a
`[beacon]` config table, a server polled through `sources/polled.py`
(`StoreSelection`, `PolledFeed`), facts and their rules, a detail-pane section,
JSON fields, and a break that reaches its server as the dashboard and the CLI
both do (`ActionProvider.reach`) with compare-and-swap on the lease's fence.
Its imports of itself are relative, so the same files work as
`lockwatch.sources.beacon`: `tests/shape/test_new_source.py` copies lockwatch,
drops this package into its `sources/`, adds one registry entry and runs the
copy's CLI and dashboard. Its server is `tests/shape/beacon_server.py`.
"""
