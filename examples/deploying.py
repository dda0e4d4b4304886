"""Deploying (docs/guides/deploying.md): what a deploy runs, as real processes. `skiplock
migrate` first, then `skiplock worker --processes 2` (a supervisor and two worker processes)
while the app enqueues, then SIGTERM: running jobs finish, and the worker exits 0.

    python examples/deploying.py                          # a temporary SQLite file
    python examples/deploying.py postgresql://localhost/scratch
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import skiplock

if __name__ == "__main__":  # the worker processes started below read the same variable
    TMP = tempfile.TemporaryDirectory(prefix="skiplock-example-")  # removed at exit
    url = sys.argv[1] if sys.argv[1:] else f"sqlite:///{TMP.name}/deploy.db"
    os.environ["SKIPLOCK_DATABASE_URL"] = url

app = skiplock.App()  # the URL in SKIPLOCK_DATABASE_URL, as a deployed service reads it


@app.task(name="resize")
async def resize(image: int) -> int:
    await asyncio.sleep(0.1)
    return os.getpid()  # which worker process ran it


def skiplock_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "skiplock", *args]


async def enqueue_and_wait() -> list[int]:
    """The web app's side: enqueue, then wait for every result."""
    try:
        handles = await app.enqueue_many(resize.prepare(i) for i in range(40))
        return list(await app.gather(handles, timeout=60))
    finally:
        await app.close()


def main() -> None:
    here = Path(__file__).resolve().parent  # APP is deploying:app, imported from here
    print("$ skiplock migrate deploying:app")
    subprocess.run(skiplock_command("migrate", "deploying:app"), cwd=here, check=True)
    command = ["worker", "deploying:app", "--processes", "2", "--concurrency", "5"]
    print("$ skiplock", " ".join(command))
    worker = subprocess.Popen(skiplock_command(*command, "--log-level", "warning"), cwd=here)
    try:
        pids = asyncio.run(enqueue_and_wait())
        print(f"{len(pids)} jobs run by {len(set(pids))} worker process(es)")
    finally:
        worker.send_signal(signal.SIGTERM)  # what systemd or Kubernetes sends at a stop
        code = worker.wait(timeout=60)
    print(f"SIGTERM: the supervisor and its workers stopped, exit code {code}")


if __name__ == "__main__":
    main()
