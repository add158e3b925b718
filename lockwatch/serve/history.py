"""`/v1/history?since=&until=`: the recorded episodes, as `lockwatch history
--json` prints them (`{"episodes": [...]}`), read from the store serve records
into; times as the CLI takes them (RFC 3339, HH:MM[:SS], -15m/-2h/-1d)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from urllib.parse import parse_qs

import orjson

from lockwatch.clock import Clock
from lockwatch.serve.answers import Response

# Past this many episodes the answer is cut (worst first are kept): bounded output.
MAX_EPISODES = 10_000


def history_answer(target: str | None, clock: Clock) -> Callable[[str], Response]:
    def answer(query: str) -> Response:
        from lockwatch.history.api import HistoryError, open_history
        from lockwatch.history.document import episode_json
        from lockwatch.model.when import BadTime, parse_when

        asked = parse_qs(query[:2048], keep_blank_values=True)
        now = clock.now()
        try:
            since_text = (asked.get("since") or [""])[0]
            until_text = (asked.get("until") or [""])[0]
            since = parse_when(since_text, now) if since_text else now - timedelta(days=1)
            until: datetime | None = parse_when(until_text, now) if until_text else None
        except BadTime as exc:
            return Response(400, f"{exc}\n".encode())
        try:
            store = open_history(target)
            try:
                found = store.episodes(since, until)[:MAX_EPISODES]
            finally:
                store.close()
        except HistoryError as exc:
            return Response(503, f"{exc}\n".encode())
        body = orjson.dumps({"episodes": [episode_json(episode) for episode in found]})
        return Response(200, body, "application/json", compressible=True)

    return answer
