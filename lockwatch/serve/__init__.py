"""`lockwatch serve`: the dashboard's collectors, headless, behind a small
read-only HTTP listener: `/metrics` for Prometheus, `/v1/locks` (the
lockwatch.ls/1 document) for other lockwatches, `/healthz` for supervisors.

- settings.py: the [serve] table and the flags over it;
- listen.py: where to listen, and whether that is loopback only;
- access.py: the bearer token, compared in constant time;
- watcher.py: every selected source's feeds into one Board, in a thread;
- metrics.py: the Board as Prometheus metrics, cardinality bounded;
- document.py: the Board as the lockwatch.ls/1 document;
- http.py: the listener (one event loop, h11, a few workers; deadlines, a cap);
- clients.py: clients that go wrong, counted, and told in a line now and then;
- app.py: all of it put together, until SIGTERM.
"""
