"""Run shell commands side by side and say how each ended: ``make test``'s way of overlapping
steps that neither share a resource nor wait on one another (the checks with each other; the
Django suite on SQLite beside the steps that restart the shared PostgreSQL server).

    python tools/together.py "make lint" "make typecheck" "make docs"

Each command's output is kept apart (a file of its own) and printed whole when it ends, so two
logs never interleave line by line; each is headed by its command, its exit code and its time.
The exit code is 0 only if every command exited 0; every command runs to its end either way, so
one failure does not hide another's.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(commands: list[str]) -> int:
    if not commands:
        print("together.py: no command given", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="together-") as tmp:
        started = time.monotonic()
        running: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        for index, command in enumerate(commands):
            log = Path(tmp) / f"{index}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(command, shell=True, stdout=out, stderr=subprocess.STDOUT)
            running.append((command, proc, log))
        failed = []
        pending = list(running)
        while pending:  # in the order they end, so a failure is told as soon as it happens
            for item in list(pending):
                command, proc, log = item
                if proc.poll() is None:
                    continue
                pending.remove(item)
                took = time.monotonic() - started
                word = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
                print(f"==> {command}: {word} after {took:.0f} s", flush=True)
                sys.stdout.buffer.write(log.read_bytes())
                sys.stdout.flush()
                if proc.returncode != 0:
                    failed.append(command)
            time.sleep(0.2)
    if failed:
        print(f"==> failed: {'; '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
