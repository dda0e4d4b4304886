"""The ids of a SkiplockBackend's results: the job's integer id, or, with the backend's
``OPTIONS["signed_result_ids"]``, that id signed with ``SECRET_KEY`` (issue 22).

Job ids count up, so a view that returns ``get_result(id)`` for an id a person hands it lets
anyone walk every job's arguments and return value by counting. A signed id cannot be made up:
the job id in front, an HMAC of it (``django.core.signing``, salted per backend alias) behind;
an id without a valid signature finds nothing. Off by default: ids already handed out, logged or
stored (and the admin's) stay what they are.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import signing


def _signer(alias: str) -> Any:
    options = (getattr(settings, "TASKS", {}).get(alias) or {}).get("OPTIONS") or {}
    if not (isinstance(options, dict) and options.get("signed_result_ids") is True):
        return None
    return signing.Signer(salt=f"skiplock.contrib.django.result-id:{alias}")


def result_id(job_id: int, alias: str) -> str:
    """The id Django's ``TaskResult`` of job ``job_id`` carries on backend ``alias``."""
    signer = _signer(alias)
    return signer.sign(str(job_id)) if signer is not None else str(job_id)


def job_id(result_id: str, alias: str) -> int:
    """The job id a result id names; ValueError for one this backend never handed out."""
    signer = _signer(alias)
    text = result_id
    if signer is not None:
        try:
            text = signer.unsign(result_id)
        except signing.BadSignature:
            raise ValueError(f"result id {result_id!r}: not signed by this backend") from None
    if not text.isdigit():
        raise ValueError(f"result id {result_id!r}: not a job id")
    return int(text)
