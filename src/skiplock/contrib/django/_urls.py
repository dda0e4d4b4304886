"""The skiplock URL of a Django database alias: skiplock opens its own pool on the same DB.

Django hands ``OPTIONS`` to psycopg as libpq parameters; skiplock's pools are asyncpg's, which
read the same names from the URL's query. Every TLS option is carried across (issue 22: without
them skiplock's workers, ``get_result`` and admin actions fell back to asyncpg's ``prefer``, no
certificate check and a plaintext fallback), and so are ``service``, ``servicefile`` and
``passfile`` (issue 43: TLS settings kept in a service file were lost on skiplock's
connection). A TLS option asyncpg has no equivalent for is an error, never dropped: dropping
``sslcrldir`` would silently stop checking revocations.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

# The libpq TLS parameters asyncpg reads from a URL (asyncpg.connect_utils, 0.30+).
TLS_OPTIONS = (
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcrl",
    "sslnegotiation",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
)


def _tls_params(options: dict[str, Any]) -> dict[str, str]:
    params: dict[str, str] = {}
    for key, value in options.items():
        if key in TLS_OPTIONS:
            if value is not None:
                params[key] = str(value)
        elif key.startswith("ssl") or key == "requiressl":
            raise ValueError(
                f"DATABASES OPTIONS {key!r}: skiplock's own connections (asyncpg) cannot honour "
                f"this TLS option; the ones they take: {', '.join(TLS_OPTIONS)}"
            )
    return params


CONNECTION_OPTIONS = ("service", "servicefile", "passfile")
"""libpq's connection service (a name in a service file holding the host, database, user,
TLS settings...) and password file, which Django hands psycopg from ``OPTIONS``: carried to
skiplock's own connections (asyncpg 0.31+ reads ``service`` and ``passfile``; skiplock passes
``servicefile`` to it), never dropped, or skiplock's pool would connect elsewhere, or in clear."""


def database_url(db: dict[str, Any], schema: str | None) -> str:
    """``postgresql://...?schema=`` or ``sqlite:///path`` for one ``DATABASES`` entry."""
    engine = str(db.get("ENGINE", ""))
    if engine.endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    if "postgresql" not in engine:
        raise ValueError(f"DATABASES ENGINE {engine!r}: skiplock needs postgresql or sqlite3")
    options = db.get("OPTIONS") or {}
    service = {k: str(options[k]) for k in CONNECTION_OPTIONS if options.get(k) is not None}
    user = quote(str(db.get("USER") or ""), safe="")
    password = db.get("PASSWORD")
    auth = f"{user}:{quote(str(password), safe='')}@" if password else (f"{user}@" if user else "")
    # with a service, what DATABASES leaves out comes from the service file (a path of "/"
    # would name the database "", the user's default, not the service's)
    host = db.get("HOST") or ("" if "service" in service else "localhost")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    name = db.get("NAME")
    path = f"/{name}" if name or "service" not in service else ""
    params = {"schema": schema} if schema else {}
    params.update(_tls_params(options))
    params.update(service)
    app_name = options.get("application_name")
    if app_name:  # skiplock's sessions carry the project's name too (pg_stat_activity)
        params["application_name"] = str(app_name)
    query = "?" + urlencode(params) if params else ""
    return f"postgresql://{auth}{host}{port}{path}{query}"
