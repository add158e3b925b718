"""Lock history: a store of lock, wait, action and outage intervals (SQLite by
default, PostgreSQL for a fleet), the recorder that fills it from the board, and
the readers behind `lockwatch history`, `ls --at` and `why --at`.

The API is `lockwatch/history/api.py`; nothing is imported here, so importing
one module of the package costs only that module.
"""
