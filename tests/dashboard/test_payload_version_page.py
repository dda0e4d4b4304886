"""The job page shows the job's payload version (seed 002's last rule), in a real browser on
both databases."""

from __future__ import annotations

from typing import Any

import pytest

from ..apps import dash_app
from .conftest import Pages, Stack

pytestmark = pytest.mark.slow


def test_the_job_page_shows_the_payload_version(stack: Stack, pages: Pages) -> None:
    from playwright.sync_api import expect

    [handle] = stack.run(stack.app.enqueue_many([dash_app.greet.prepare("ada", "fr")]))
    page: Any = pages.as_user("otto")
    page.goto(f"/jobs/{handle.id}")
    version = page.locator("dl.facts dt", has_text="payload version")
    expect(version).to_be_visible()
    expect(version.locator("xpath=following-sibling::dd[1]")).to_have_text("2")
