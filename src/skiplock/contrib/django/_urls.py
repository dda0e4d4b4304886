"""The skiplock URL of a Django database alias: skiplock opens its own pool on the same DB."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode


def database_url(db: dict[str, Any], schema: str | None) -> str:
    """``postgresql://...?schema=`` or ``sqlite:///path`` for one ``DATABASES`` entry."""
    engine = str(db.get("ENGINE", ""))
    if engine.endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    if "postgresql" not in engine:
        raise ValueError(f"DATABASES ENGINE {engine!r}: skiplock needs postgresql or sqlite3")
    user = quote(str(db.get("USER") or ""), safe="")
    password = db.get("PASSWORD")
    auth = f"{user}:{quote(str(password), safe='')}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    params = {"schema": schema} if schema else {}
    app_name = (db.get("OPTIONS") or {}).get("application_name")
    if app_name:  # skiplock's sessions carry the project's name too (pg_stat_activity)
        params["application_name"] = str(app_name)
    query = "?" + urlencode(params) if params else ""
    return f"postgresql://{auth}{host}{port}/{db['NAME']}{query}"
