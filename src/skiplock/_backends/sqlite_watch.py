"""File notifications for the SQLite change watcher: a write to the ``-wal`` file wakes it.

SQLite has no NOTIFY, and polling ``PRAGMA data_version`` on a timer makes a wake-up wait for
the next tick (5.6 ms p50, 19 ms p99 across processes). Every commit in WAL mode appends to the
``-wal`` file, so the kernel can tell us at once. On Linux this uses ``inotify_simple``: a
~100-line ctypes wrapper whose inotify descriptor the event loop watches with ``add_reader``
(no thread, no debounce). ``watchfiles`` was the other candidate; its Rust watcher batches
events over a step of at least some milliseconds, which is the delay being removed here.

A notification is a hint, never the truth: it can arrive before the commit is visible (the
WAL is written before the shared-memory index says so), and our own commits write the file
too. The caller confirms every hint with ``data_version`` and keeps a slow poll as backstop.
Where inotify is missing (macOS, Windows, a kernel without it), ``open_wal_watch`` returns
None and the caller polls as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger("skiplock.worker")

try:  # Linux only; elsewhere the poll alone
    import inotify_simple
except (ImportError, OSError):  # pragma: no cover - not on Linux
    inotify_simple = None

WAL_EVENTS = ("MODIFY", "DELETE_SELF", "MOVE_SELF")


class WalWatch:
    """Calls ``on_change`` from the event loop whenever the watched ``-wal`` file is written."""

    def __init__(self, inotify: Any, path: str, loop: asyncio.AbstractEventLoop) -> None:
        self._inotify = inotify
        self._loop = loop
        self._path = path
        self._name = os.path.basename(path)
        self._mask = 0
        for flag in WAL_EVENTS:
            self._mask |= getattr(inotify_simple.flags, flag)
        self._on_change: Callable[[], None] = lambda: None
        # The directory too: the WAL may be deleted by a last closing connection and created
        # again by the next writer, which a watch on the old file would never see.
        parent = os.path.dirname(os.path.abspath(path))
        inotify.add_watch(parent, inotify_simple.flags.CREATE)
        self._watch_file()
        loop.add_reader(inotify.fileno(), self._readable)

    def _watch_file(self) -> None:
        with contextlib.suppress(FileNotFoundError):  # not there yet: the directory watch waits
            self._inotify.add_watch(self._path, self._mask)

    def on_change(self, callback: Callable[[], None]) -> None:
        self._on_change = callback

    def _readable(self) -> None:
        events = self._inotify.read(timeout=0)  # everything queued: one wake for a burst
        ours = [e for e in events if not e.name or e.name == self._name]
        if any(e.name == self._name for e in ours):  # created again: watch the new file
            self._watch_file()
        if ours:
            self._on_change()

    def close(self) -> None:
        self._loop.remove_reader(self._inotify.fileno())
        self._inotify.close()


def open_wal_watch(db_path: str) -> WalWatch | None:
    """A watch on ``db_path``'s ``-wal`` file, or None where the OS offers no notifications
    (the caller then polls). The WAL must exist: open a connection and read first."""
    if inotify_simple is None:
        return None
    try:
        inotify = inotify_simple.INotify(nonblocking=True)
    except OSError as exc:  # out of inotify instances, or a kernel without it
        log.info("no file notifications for %s (%s); polling data_version", db_path, exc)
        return None
    try:
        return WalWatch(inotify, f"{db_path}-wal", asyncio.get_running_loop())
    except OSError as exc:
        inotify.close()
        log.info("cannot watch %s-wal (%s); polling data_version", db_path, exc)
        return None
