"""Append one line per execution to SKIPLOCK_TEST_LOG (O_APPEND writes of a short line are
atomic), so tests can count exactly how often each job ran, across processes."""

from __future__ import annotations

import os


def record(line: str) -> None:
    fd = os.open(os.environ["SKIPLOCK_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)
