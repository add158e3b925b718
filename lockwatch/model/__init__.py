"""Pure lock data and verdicts: no I/O, no Textual, no psycopg, no psutil."""

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.process import ProcessFacts, ProcessLookup
from lockwatch.model.verdict import State, Verdict, evaluate

__all__ = [
    "Holder",
    "Lock",
    "ProcessFacts",
    "ProcessLookup",
    "Reason",
    "State",
    "Verdict",
    "evaluate",
]
