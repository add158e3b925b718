"""PostgreSQL: pg_locks with the sessions behind them, polled over one connection per server."""
