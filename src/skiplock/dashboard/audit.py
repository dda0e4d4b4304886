"""The dashboard's side of the audit trail: what only it sees (refused actions, refused
sign-ins) goes to ``app.record_action``; skiplock's operations record the rest themselves."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import SkiplockError

if TYPE_CHECKING:
    from .state import Dashboard

log = logging.getLogger("skiplock.dashboard")

MAX_FIELD_CHARS = 1000
"""A client writes the name and the path it sends: kept to this much of each."""


async def audit(dash: Dashboard, what: str, who: str, target: str, detail: str = "") -> None:
    """Store in the audit trail; a database that cannot take it is logged, and the answer
    to the person is still given."""
    fit = [v.replace("\x00", "")[:MAX_FIELD_CHARS] or "?" for v in (who, target, detail)]
    try:
        await dash.app.record_action(
            what, who=fit[0], target=fit[1], detail=fit[2] if detail else ""
        )
    except SkiplockError as exc:
        log.error("audit trail not written (%s by %s on %s): %s", what, who, target, exc)
