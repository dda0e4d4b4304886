"""skiplock's options in a SQLite URL: the file's path, and how hard each commit waits.

- ``sqlite:///rel.db`` names ``rel.db``; ``sqlite:////abs/path.db`` names ``/abs/path.db``.
- ``synchronous=full`` (the default) or ``synchronous=normal``: SQLite's ``PRAGMA
  synchronous`` under WAL. ``full`` syncs the WAL at every commit, so a committed enqueue,
  claim or completion survives a power loss. ``normal`` syncs only at checkpoints: the last
  transactions before a power loss or OS crash (not a process crash) may be lost, the file is
  never corrupted, and a lost claim or completion leaves the job where it was before (to run
  again after its lease), never run twice at once.

- ``mode=0640`` (octal): the permissions of a database file skiplock creates, and so of its
  ``-wal`` and ``-shm`` (SQLite gives them the database file's). The default is ``0600``, the
  owner alone, whatever the umask: jobs carry their arguments, results and errors. The owner
  must keep read and write; execute and special bits are refused. A file that already exists
  keeps the mode it has (skiplock never changes it).

Any other option, or any other value, is refused with a message naming it: a misspelt
durability setting must not silently fall back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from ...errors import ConfigurationError

SYNCHRONOUS = ("full", "normal")
"""The values ``synchronous=`` accepts, the default first."""

DEFAULT_MODE = 0o600
"""The permissions of a database file skiplock creates, unless ``mode=`` says otherwise."""


@dataclass(frozen=True)
class SQLiteUrl:
    """A skiplock SQLite URL taken apart."""

    path: str
    synchronous: str = "full"
    """``full`` or ``normal``: the ``PRAGMA synchronous`` every connection of a backend uses."""
    mode: int = DEFAULT_MODE
    """The permissions a new database file (and so its -wal and -shm) is created with."""


def parse_sqlite_url(url: str) -> SQLiteUrl:
    """The path and options of ``url``, each checked (errors name the option)."""
    parts = urlsplit(url)
    if parts.netloc:
        raise ConfigurationError(f"url={url!r}: a SQLite URL has no host; use sqlite:///PATH")
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not path or path == ":memory:":
        raise ConfigurationError(
            f"url={url!r}: give a file path; an in-memory database cannot be shared by workers"
        )
    query = parse_qs(parts.query, keep_blank_values=True)
    synchronous = (query.pop("synchronous", None) or ["full"])[-1].lower()
    if synchronous not in SYNCHRONOUS:
        raise ConfigurationError(
            f"url={url!r}: synchronous={synchronous!r} is not supported; use "
            "synchronous=full (the default: every commit survives a power loss) or "
            "synchronous=normal (faster commits; the last few may be lost on power loss)"
        )
    mode = _mode(query.pop("mode", None), url)
    if query:
        raise ConfigurationError(
            f"url={url!r}: unknown option {sorted(query)[0]!r}; a SQLite URL takes only "
            "synchronous=full|normal and mode=OCTAL"
        )
    return SQLiteUrl(path, synchronous, mode)


def _mode(values: list[str] | None, url: str) -> int:
    if values is None:
        return DEFAULT_MODE
    text = values[-1]
    mode = int(text, 8) if re.fullmatch("[0-7]{3,4}", text) else -1
    if mode < 0 or mode & 0o600 != 0o600 or mode & ~0o666:
        raise ConfigurationError(
            f"url={url!r}: mode={text!r} must be octal permissions such as 0600 (the default) "
            "or 0640: the owner reads and writes, nobody executes"
        )
    return mode
