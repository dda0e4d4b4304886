"""What every ``skiplock`` command shares: loading the app, running a coroutine, logging."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click

from ._app import App
from .errors import SkiplockError

T = TypeVar("T")


def load_app(spec: str) -> App:
    """Import ``module:attribute`` (or ``module`` holding ``app``) and check it is an App."""
    module_name, _, attribute = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(f"cannot import {module_name!r}: {exc}", param_hint="APP") from exc
    app = getattr(module, attribute or "app", None)
    if not isinstance(app, App):
        raise click.BadParameter(
            f"{spec!r} is not a skiplock.App (expected MODULE:ATTRIBUTE)", param_hint="APP"
        )
    return app


LOOPS = ("auto", "asyncio", "uvloop")


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop to run on: ``uvloop`` (the ``skiplock[uvloop]`` extra), ``asyncio``'s
    own, or ``auto``: uvloop where it is installed."""
    if name == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if name == "uvloop":
            raise click.ClickException(
                "--loop uvloop: uvloop is not installed (pip install 'skiplock[uvloop]')"
            ) from None
        return None
    return uvloop.new_event_loop


def run_async(app: App, work: Callable[[], Awaitable[T]], *, loop: str = "asyncio") -> T:
    async def main() -> T:
        try:
            return await work()
        finally:
            await app.close()

    try:
        with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
            return runner.run(main())
    except SkiplockError as exc:
        raise click.ClickException(str(exc)) from exc


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s",
        stream=sys.stderr,
    )
