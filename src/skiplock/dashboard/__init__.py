"""skiplock's web dashboard (the ``dashboard`` extra: Starlette, Jinja2, uvicorn).

``skiplock dashboard APP --port 8080`` serves it; ``create_app(app, auth=...)`` returns the
same ASGI app to mount in a Starlette, FastAPI or Django-ASGI project. See docs/dashboard.md.
"""

from __future__ import annotations

from .app import create_app
from .auth import (
    PROXY_SECRET_HEADER,
    Auth,
    Role,
    User,
    basic_auth,
    hash_password,
    no_auth,
    proxy_auth,
    verify_password,
)

__all__ = [
    "PROXY_SECRET_HEADER",
    "Auth",
    "Role",
    "User",
    "basic_auth",
    "create_app",
    "hash_password",
    "no_auth",
    "proxy_auth",
    "verify_password",
]
