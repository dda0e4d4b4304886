"""Database URLs as people may see them: the password masked.

One helper for every place a URL reaches a log line, an error or a ``repr`` (issue 9 item 17):
a URL pasted into a bug report or a shared terminal must not carry the credentials with it.
"""

from __future__ import annotations

import re

# From the scheme to the last "@" of the authority: "user:secret@" becomes "user:***@".
_NETLOC_PASSWORD = re.compile(r"(?<=://)([^:/@]*):[^/]*@")
# libpq also takes the password as a query parameter.
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&]*")


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***``; the rest (host, port, database) kept,
    because that is what a person needs to tell which database an error is about."""
    return _QUERY_PASSWORD.sub(r"\1***", _NETLOC_PASSWORD.sub(r"\1:***@", url))


def mask_in(text: str, url: str) -> str:
    """``text`` with every occurrence of ``url`` masked (for messages built elsewhere)."""
    return text.replace(url, mask_url(url)) if url else text
