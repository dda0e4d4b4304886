"""PostgreSQL through asyncpg: a pool for work, one for claims, a dedicated connection for LISTEN.

asyncpg over psycopg 3 because it was faster on the claim/complete loop measured here (binary
protocol, prepared statements cached per connection); psycopg connections are still accepted
for transactional enqueue, which runs the same statement through them.

``PostgresBackend`` binds the rooms of this package into the Backend protocol: its state and
sessions are ``connection.Connection``'s, and each group of operations is the room that owns
it (``migrate``, ``enqueue``, ``unique``, ``claim``, ``keys``, ``completion``, ``workflow``,
``storage.operations``, ``observe``, ``wake``, ``inspect``).
"""

from __future__ import annotations

from .claim import Claim
from .inspect import Inspect
from .job_logs import JobLogs
from .keys import Keys
from .migrate import Migrate
from .observe import Observe
from .wake import Wake
from .workflow import Workflow


class PostgresBackend(Migrate, Workflow, Wake, Claim, Keys, Inspect, Observe, JobLogs):
    """The Backend protocol on PostgreSQL."""

    __module__ = "skiplock._backends.postgres"  # its name where the registry finds it

    supports_push = True
    vacuums_hot = True
    keeps_wal = False
    inserts_here = False
