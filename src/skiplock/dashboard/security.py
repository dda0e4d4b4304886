"""What keeps a browser from being turned against the queue: CSRF tokens and strict headers.

The CSRF token is an HMAC of the user's name and role under a secret: stateless (no session
store, no cookie), different per user, and unreadable to another site, which can make a
logged-in browser *send* a POST (basic credentials ride along) but never read the page that
holds the token. A POST must carry it and must not come from another origin.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from ..errors import ConfigurationError
from .auth import User

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""No inline script or style at all: even a value that slipped past escaping could not run."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


STRICT_TRANSPORT_SECURITY = "max-age=31536000"
"""Sent with every answer given over HTTPS: a browser that saw it never asks this host over
plain HTTP again for a year, so basic credentials cannot be sent in clear by a mistyped link."""

MIN_SECRET_BYTES = 32
"""The shortest CSRF key taken: it signs every form's token and every notice, so a short one
(``SKIPLOCK_DASHBOARD_SECRET=x``) could be guessed, and then any site could forge a form."""


class Csrf:
    """Makes and checks the per-user token every form carries."""

    def __init__(self, secret: str | bytes | None = None) -> None:
        if isinstance(secret, str):
            secret = secret.encode()
        if secret is not None and len(secret) < MIN_SECRET_BYTES:
            raise ConfigurationError(
                f"create_app: secret: the CSRF key is {len(secret)} bytes; it must be at least "
                f"{MIN_SECRET_BYTES} (python -c 'import secrets; print(secrets.token_hex(32))')"
            )
        # Random per process unless given: several dashboard processes behind one balancer
        # need a shared secret (create_app(secret=...)).
        self._key = secret or secrets.token_bytes(MIN_SECRET_BYTES)

    def token(self, user: User) -> str:
        message = f"csrf\x00{user.name}\x00{user.role.label}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def sign(self, notice: str) -> str:
        """A notice's signature: the page after an action shows only notices the dashboard
        wrote, so a link cannot put words of its own in the page's status line."""
        return hmac.new(self._key, f"notice\x00{notice}".encode(), hashlib.sha256).hexdigest()

    def pseudonym(self, key: str) -> str:
        """What a viewer sees of a concurrency or ordering key: a keyed hash, the same on every
        page of this dashboard (rows can be told apart and followed), which no one can compare
        with a guess (keys come from arguments: a tenant's e-mail, an account number)."""
        digest = hmac.new(self._key, f"key\x00{key}".encode(), hashlib.sha256).hexdigest()
        return f"key {digest[:10]}"

    def notice(self, text: str | None, signature: str | None) -> str | None:
        if not text or not signature or not hmac.compare_digest(self.sign(text), signature):
            return None
        return text

    def valid(self, user: User, token: object) -> bool:
        return isinstance(token, str) and hmac.compare_digest(self.token(user), token)


def same_origin(origin: str | None, host: str | None) -> bool:
    """A POST's Origin header, when the browser sends one, must name this server's host
    (the scheme is not compared: behind a TLS-terminating proxy the server sees http)."""
    if not origin:
        return True  # old browsers and non-browser clients: the token alone decides
    return bool(host) and urlsplit(origin).netloc == host
