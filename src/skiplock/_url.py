"""Database URLs as people may see them: the password masked.

One helper for every place a URL reaches a log line, an error or a ``repr`` (issue 9 item 17):
a URL pasted into a bug report or a shared terminal must not carry the credentials with it.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit

# From the user name to the "@" that ends the authority: "user:secret@" becomes "user:***@".
# That "@" is the one followed by a host (no "@" or "/") and the path, query or end: a
# password may hold "/", "@" or "\\" (the URL is then not one urlsplit reads right, which is
# exactly when a message quotes it raw), and a URL in the query is masked on its own.
# A colon followed by digits and the path is a port, not a password ("host:5432/db?x=a@b").
_NETLOC_PASSWORD = re.compile(r"(?<=://)([^:/@]*):(?!\d+(?:[/?#]|$)).*?@(?=[^@/?#]*(?:[/?#]|$))")
# libpq also takes the password (and the client key's passphrase) as query parameters.
_QUERY_PASSWORD = re.compile(r"(?i)([?&](?:ssl)?password=)[^&]*")
_SECRET_PARAMS = ("password", "sslpassword")


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***``; the rest (host, port, database) kept,
    because that is what a person needs to tell which database an error is about.

    The query is decoded before it is masked (issue 22: a percent-encoded ``listen_url`` hid its
    password from a pattern over the raw text), a URL inside it masked the same way, and the
    query written back encoded, readable where the characters allow."""
    masked = _NETLOC_PASSWORD.sub(r"\1:***@", url)
    try:
        parts = urlsplit(masked)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:  # not a URL Python can take apart: the patterns alone
        return _QUERY_PASSWORD.sub(r"\1***", masked)
    if not pairs:
        return _QUERY_PASSWORD.sub(r"\1***", masked)
    shown = [
        (
            key,
            "***"
            if key.lower() in _SECRET_PARAMS
            else mask_url(value)
            if "://" in value
            else value,
        )
        for key, value in pairs
    ]
    return parts._replace(query=urlencode(shown, safe=":/@*?")).geturl()


def mask_in(text: str, url: str) -> str:
    """``text`` with every occurrence of ``url`` masked (for messages built elsewhere)."""
    return text.replace(url, mask_url(url)) if url else text
