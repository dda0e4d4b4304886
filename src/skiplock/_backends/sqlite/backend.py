"""SQLite through the standard library, on one dedicated thread per backend.

Each operation is one function run on that thread, holding one ``BEGIN IMMEDIATE``
transaction: a single hop between the event loop and the thread per operation, however many
statements it takes. WAL lets readers run beside the writer; ``synchronous=FULL`` is the default,
because batching makes durability cheap (DESIGN.md); ``?synchronous=normal`` in the URL trades
the last commits before a power loss for cheaper commits (``url.py``).

The class binds the rooms' operations together: the file and its thread (``connection.py``),
the migrations (``migrate.py``), inserts (``enqueue.py``), claims (``claim.py``), outcomes
(``completion.py``), workflows (``workflow.py``), what a person reads and drives
(``inspect.py``), the health numbers (``observe.py``), the file's watch (``wake.py``) and the
storage upkeep (``storage/``). Every statement is in ``queries/*.sql`` (``statements.py``).
"""

from __future__ import annotations

from .claim import Claiming
from .completion import Completing
from .inspect import Inspecting
from .job_logs import JobLogs
from .migrate import Migrating
from .observe import Observing
from .storage.upkeep import Storing
from .wake import Waking


class SQLiteBackend(
    Migrating, Claiming, Completing, Inspecting, Observing, Waking, Storing, JobLogs
):
    """The Backend protocol on one SQLite file."""

    supports_push = True
    vacuums_hot = False
    keeps_wal = True
    inserts_here = True
