"""File notifications for the SQLite change watcher: a commit to the ``-wal`` file wakes it.

SQLite has no NOTIFY, and polling ``PRAGMA data_version`` on a timer makes a wake-up wait for
the next tick (5.6 ms p50, 19 ms p99 across processes). Every commit in WAL mode writes the
``-wal`` file, so the kernel can say so at once. On Linux this uses ``inotify_simple``: a
~100-line ctypes wrapper over the inotify descriptor, no thread or debounce of its own.
``watchfiles`` was the other candidate; its Rust watcher delivers batches after a debounce
step of milliseconds, which is the delay being removed here.

A notification is a hint, never the truth: it arrives when the WAL is *written*, before the
commit is synced (about a millisecond at ``synchronous=full`` here) and visible. So a dedicated
thread waits on the descriptor and, after a hint, reads ``data_version`` on its own connection
every 0.1 ms, 30 % longer each time, for ~37 ms after the last hint, waking the loop at each
commit that shows (and once at the end if the last hint never showed one). The thread exists
because the event loop cannot wait less than a millisecond: epoll rounds every timeout up to
one, which kept wake-ups ~0.8 ms behind the commit. Our own commits write the file too; those
wake-ups cost a claim that finds nothing new, as the timer's did. Where inotify is missing
(macOS, Windows, a kernel without it), ``open_wal_watch`` returns None and the caller polls as
before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from .connection import Connected
from .errors import wrapped as _wrapped
from .statements import STATEMENTS as sql

log = logging.getLogger("skiplock.worker")

try:  # Linux only; elsewhere the poll alone
    import inotify_simple
except (ImportError, OSError):  # pragma: no cover - not on Linux
    inotify_simple = None

CONFIRM_S = tuple(0.0001 * 1.3**i for i in range(18))
"""After a hint, the pauses between looks at ``data_version``: 0.1 ms growing 30 % a time,
~37 ms in all, so a wake-up lags the commit by at most ~30 % of the time it took to show."""
READ_TIMEOUT_MS = 250
"""How long the thread blocks on the descriptor before checking whether it should stop."""


class WalWatch:
    """A thread that calls ``on_change`` (on the event loop) after each visible commit that
    the ``-wal`` file's notifications announce."""

    def __init__(self, db_path: str, inotify: Any, on_change: Callable[[], None]) -> None:
        self._db_path = db_path
        self._wal = f"{db_path}-wal"
        self._name = os.path.basename(self._wal)
        self._inotify = inotify
        self._loop = asyncio.get_running_loop()
        self._on_change = on_change
        self._stop = threading.Event()
        self._mask = inotify_simple.flags.MODIFY | inotify_simple.flags.DELETE_SELF
        # The directory too: the WAL may be deleted by a last closing connection and created
        # again by the next writer, which a watch on the old file would never see.
        inotify.add_watch(os.path.dirname(os.path.abspath(self._wal)), inotify_simple.flags.CREATE)
        self._watch_file()
        self._conn = sqlite3.connect(db_path, check_same_thread=False)
        self._version = self._data_version()
        self._thread = threading.Thread(target=self._run, name="skiplock-wal-watch", daemon=True)
        self._thread.start()

    def _watch_file(self) -> None:
        with contextlib.suppress(FileNotFoundError):  # not there yet: the directory watch waits
            self._inotify.add_watch(self._wal, self._mask)

    def _data_version(self) -> int | None:
        try:
            return int(self._conn.execute(sql.DATA_VERSION).fetchone()[0])
        except sqlite3.Error:
            return None  # busy for a moment (a checkpoint): the next look reads it

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self._hinted(self._read(READ_TIMEOUT_MS)):
                    self._confirm()
        except (OSError, ValueError) as exc:  # the descriptor failed: the poll carries on
            if not self._stop.is_set():
                log.warning("SQLite file notifications stopped (%s); polling", exc)
        finally:
            self._inotify.close()
            self._conn.close()

    def _read(self, timeout_ms: int) -> list[Any]:
        """The descriptor's events, waiting up to ``timeout_ms`` (0: only what is there).
        Every wait on the descriptor goes through here, which is also where a test holds
        the watcher to make an interleaving certain."""
        return list(self._inotify.read(timeout=timeout_ms))

    def _hinted(self, events: list[Any]) -> bool:
        """Whether ``events`` say the WAL was written (re-watching a WAL created anew)."""
        ours = [e for e in events if not e.name or e.name == self._name]
        if any(e.name == self._name for e in ours):
            self._watch_file()
        return bool(ours)

    def _confirm(self) -> None:
        """Follow a hint until the schedule's window closes: wake the loop at every commit
        that becomes visible, and end the window in a wake-up anyway if the last hint was
        never confirmed, so a commit is never left to the poll backstop in silence.

        A hint is read when the WAL is written, before the commit is visible, and one read
        may carry the writes of several commits; so seeing one change does not end the
        look (the next commit of the batch shows a moment later), and a write seen meanwhile
        starts the quick looks again. The pauses of a millisecond or more wait on the
        descriptor itself, so a write ends them at once (sleeping them out left a commit
        that landed during a 2-8 ms pause unseen until it ended: W4 at
        ``synchronous=normal`` p99 6.2 ms). A window that closes with its last hint
        unconfirmed (the commit slower to show than the window, or a write that was no
        commit) wakes the loop once: a claim that finds nothing costs less than a job left
        for the backstop (issue 23: the lost wake-up the short schedule used to hide)."""
        step, unconfirmed = 0, True
        while step <= len(CONFIRM_S) and not self._stop.is_set():
            version = self._data_version()
            if version is not None and version != self._version:
                self._version = version
                unconfirmed = False
                self._wake()
            if self._hinted(self._pause(step)):
                step, unconfirmed = 0, True
            else:
                step += 1
        if unconfirmed and not self._stop.is_set():
            self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(self._on_change)

    def _pause(self, step: int) -> list[Any]:
        """Wait the schedule's pause number ``step`` (none past its end), or less if a write
        comes: the events read. Under a millisecond the wait is a sleep (poll's timeout is
        in whole milliseconds), then one look at the descriptor."""
        if step >= len(CONFIRM_S):
            return self._read(0)
        pause = CONFIRM_S[step]
        if pause < 0.001:
            time.sleep(pause)
            return self._read(0)
        return self._read(int(pause * 1000))

    def close(self) -> None:
        """Stop the thread (it ends within READ_TIMEOUT_MS and closes what it holds)."""
        self._stop.set()


def open_wal_watch(db_path: str, on_change: Callable[[], None]) -> WalWatch | None:
    """A watch on ``db_path``'s ``-wal`` file calling ``on_change`` on the running loop, or
    None where the OS offers no notifications (the caller then polls)."""
    if inotify_simple is None:
        return None
    try:
        inotify = inotify_simple.INotify()
    except OSError as exc:  # out of inotify instances, or a kernel without it
        log.info("no file notifications for %s (%s); polling data_version", db_path, exc)
        return None
    try:
        return WalWatch(db_path, inotify, on_change)
    except (OSError, sqlite3.Error) as exc:
        inotify.close()
        log.info("cannot watch %s-wal (%s); polling data_version", db_path, exc)
        return None


WATCH_MIN_S = 0.005


WATCH_MAX_S = 0.1
"""Without file notifications, how often a listening worker checks the file for commits:
every 5 ms after a change, backing off to every 100 ms while nothing changes (``listen``)."""


WATCH_BACKSTOP_S = 0.1
"""With file notifications, how often it checks anyway (a lost or unsupported notification)."""


def _next_look(notified: bool, seen: bool, interval: float) -> float:
    """Seconds until the change watcher's next timed look at data_version."""
    if notified:
        return WATCH_BACKSTOP_S
    return WATCH_MIN_S if seen else min(WATCH_MAX_S, interval * 1.5)


class Waking(Connected):
    """The file's change watch as the backend's listen."""

    @asynccontextmanager
    async def listen(self, on_wake: Callable[[str], None]) -> AsyncIterator[asyncio.Event]:
        """Wake on any commit to the file by another connection, this process's or another's.

        SQLite has no NOTIFY. ``PRAGMA data_version`` changes when another connection has
        committed, and reading it costs microseconds. Where the OS sends file notifications
        (``WalWatch`` above), a write to the ``-wal`` file makes a thread read it until the
        commit shows, within a fraction of a millisecond; a timer every 100 ms stays on as
        backstop. Elsewhere the timer alone does it: every 5 ms after a change, backing off
        to 100 ms while nothing changes (~0.2 ms of CPU a tick on the benchmark VM). Either
        way the worker wakes every queue: the file does not say which. The yielded event is
        set if the watcher's connection fails.
        """
        lost = asyncio.Event()
        with _wrapped("listen"):
            conn = sqlite3.connect(self.path)
            conn.execute(sql.SCHEMA_PEEK).fetchall()  # a read opens the WAL file to watch
            version = conn.execute(sql.DATA_VERSION).fetchone()[0]
        files = open_wal_watch(self.path, lambda: on_wake("*"))

        def changed() -> bool | None:
            """Whether another commit is visible; None when the connection failed."""
            nonlocal version
            try:
                now = conn.execute(sql.DATA_VERSION).fetchone()[0]
            except sqlite3.OperationalError:
                return False  # busy for a moment (a checkpoint): the next look reads it
            except sqlite3.Error as exc:
                log.warning("SQLite change watcher failed (%s)", exc)
                return None
            if now == version:
                return False
            version = now
            return True

        async def watch() -> None:
            interval = WATCH_BACKSTOP_S if files is not None else WATCH_MIN_S
            while True:
                await asyncio.sleep(interval)
                seen = changed()
                if seen is None:
                    lost.set()
                    return
                if seen:
                    on_wake("*")
                interval = _next_look(files is not None, seen, interval)

        watcher = asyncio.create_task(watch(), name="skiplock-sqlite-watch")
        try:
            yield lost
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if files is not None:
                files.close()
            conn.close()

    @asynccontextmanager
    async def listen_done(
        self, on_done: Callable[[list[int] | None], None]
    ) -> AsyncIterator[asyncio.Event]:
        """The same data_version watch: a commit says something changed, never which jobs."""
        async with self.listen(lambda _queue: on_done(None)) as lost:
            yield lost
