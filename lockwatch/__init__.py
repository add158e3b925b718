"""lockwatch: see who holds which lock, for how long, and whether it is stale.

Importing the package must stay cheap: no Textual, no psycopg, no psutil here.
"""

__version__ = "0.1.0"
