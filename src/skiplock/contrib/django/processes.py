"""``concurrent_worker --processes N``: N worker processes under skiplock's supervisor.

Each child is the same command with ``--processes 1``, started as a fresh interpreter
(``python manage.py ...`` when the command came from a ``manage.py``, else ``python -m
django ...`` with the same settings module). The supervisor is skiplock's own
(``_worker.supervisor``): a child that dies after it was ready is restarted (1 s, doubling to
a minute while they keep dying), so a concurrency slot is never silently lost; a child that
fails before it was ever ready stops them all and the command exits with its code;
SIGTERM/SIGINT are forwarded and the command exits once every child has drained.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from ..._worker.supervisor import Supervisor


def child_command(command: str, options: Mapping[str, Any]) -> list[str]:
    """The command line of one child: the parsed options written back out, ``--processes 1``."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "manage.py" and os.path.exists(argv0):
        launcher = [sys.executable, argv0]
    else:
        launcher = [sys.executable, "-m", "django"]
    args = [command, "--processes", "1", f"--verbosity={options.get('verbosity', 1)}"]
    if options.get("backend_name") is not None:
        args.append(f"--backend={options['backend_name']}")
    for name in ("interval", "shutdown_timeout", "concurrency", "scheduler_interval", "lease"):
        if options.get(name) is not None:
            args.append(f"--{name.replace('_', '-')}={options[name]}")
    for queue in options.get("queue_names") or ():
        args.append(f"--queue-name={queue}")
    if options.get("scheduler") is False:
        args.append("--no-scheduler")
    if options.get("burst"):
        args.append("--burst")
    if options.get("reload") is False:
        args.append("--no-reload")
    return [*launcher, *args]


def supervise(command: str, options: Mapping[str, Any], processes: int) -> int:
    """Run ``processes`` children of this command until they all exit; their worst code."""
    from django.conf import settings

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings.SETTINGS_MODULE or "")
    supervisor = Supervisor(child_command(command, options))
    previous = {
        sig: signal.signal(sig, supervisor.forward)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
    }
    try:
        return supervisor.run(processes)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
