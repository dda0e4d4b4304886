"""``Dashboard``: what every page and action reaches through ``request.app.state.dashboard``.

A module of its own, below the pages, the actions and ``create_app``, so each of them names
it without importing the others (``app.py`` builds it; the pages only read it)."""

from __future__ import annotations

from .._app import App
from .audit import Refusals
from .auth import Auth
from .render import Renderer
from .sampler import Sampler
from .security import Csrf


class Dashboard:
    """What every page and action reaches through ``request.app.state.dashboard``."""

    def __init__(
        self, app: App, auth: Auth, csrf: Csrf, render: Renderer, sampler: Sampler
    ) -> None:
        self.app, self.auth, self.csrf, self.render, self.sampler = (
            app,
            auth,
            csrf,
            render,
            sampler,
        )
        self.refusals = Refusals()
        """Refused actions and sign-ins: what this minute's cap still lets into the trail."""
