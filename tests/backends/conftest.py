"""The backend under test: the conformance modules' ``backend``, on the pinned-clock app (a
module that needs the real clock overrides it)."""

from __future__ import annotations

import pytest

import skiplock
from skiplock._backends import Backend


@pytest.fixture
async def backend(clocked_app: skiplock.App) -> Backend:
    return await clocked_app.backend()
