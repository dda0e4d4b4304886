"""What every ``skiplock`` command shares: finding the app, running a coroutine, and the one
error convention.

The convention: anything a person can fix (a bad APP, a bad option, a refused operation, a
SkiplockError from the database) ends the command with ONE line on stderr, ``Error: ...``, and
a non-zero exit code, never a traceback; tracebacks are kept for defects in skiplock itself.
Exit code 1 means "the operation was refused" (unknown job, nothing to retry), 2 means "the
command cannot run as given" (bad usage or APP, a schema to migrate or upgrade, and every
SkiplockError that stops a worker, so a supervisor can tell it from a crash).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from .._app import App
from .._logging import FORMATS
from .._logging import configure_logging as set_up_logging
from .._url import mask_in
from ..errors import ConfigurationError, SchemaError, SkiplockError, UrlRefused
from .output import printable

T = TypeVar("T")

REFUSED = 1
CANNOT_RUN = 2
URL_INSTEAD = "<--url>"
"""What APP holds when ``--url`` names the database instead (see ``AppCommand``)."""
USAGE_APP = "(APP | --url URL)"


class Group(click.Group):
    """A command group whose list of commands shows each one's whole first sentence.

    click cuts a summary to fit one line and ends it with "..."; a cut sentence reads as a
    broken one, so the summary is wrapped instead (the docstrings keep first sentences short).
    """

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class CliError(click.ClickException):
    """One line on stderr and an exit code: the only way a command reports a failure."""

    def __init__(self, message: str, exit_code: int = REFUSED) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares a ClassVar

    def format_message(self) -> str:
        """The message with its control characters shown: it may quote a stored value."""
        return printable(self.message)


# -- numbers at the edge -------------------------------------------------------------------

MAX_COUNT = 2**31 - 1
"""Limits and counts are PostgreSQL integers; SQLite takes more, but both must agree, and a
larger number is a typo: refused here rather than as a driver's OverflowError."""
MAX_SECONDS = 10 * 365 * 86400.0
"""Ten years: the longest duration a person can mean (past it, datetimes overflow)."""
LIMIT = click.IntRange(min=1, max=MAX_COUNT)


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """A finite number of seconds within bounds (click's FloatRange lets nan through)."""

    name = "seconds"

    def __init__(self, low: float, high: float = MAX_SECONDS) -> None:
        self.low, self.high = low, high

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not (math.isfinite(number) and self.low <= number <= self.high):
            self.fail(f"{value!r}: must be from {self.low:g} to {self.high:g} seconds", param, ctx)
        return number


def bounded(option: str, number: float, low: float, high: float) -> float:
    """``number`` if finite and within [low, high], else a one-line error naming ``option``."""
    if not (math.isfinite(number) and low <= number <= high):
        raise CliError(f"{option} {number!r}: must be from {low:g} to {high:g}", CANNOT_RUN)
    return number


# -- finding the app ------------------------------------------------------------------------


def load_app(spec: str) -> App:
    """Import ``module:attribute`` (or ``module`` holding ``app``) and check it is an App.

    Whatever importing the user's module raises (ImportError, SyntaxError, an exception at
    import time) is reported as one line naming the module, not as a traceback."""
    module_name, _, attribute = spec.partition(":")
    if not module_name.strip():
        raise CliError(f"APP {spec!r}: expected MODULE:ATTRIBUTE, e.g. myapp.tasks:app", CANNOT_RUN)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's code: any failure is theirs to read, in one line
        raise CliError(
            f"cannot import {module_name!r}: {type(exc).__name__}: {exc}", CANNOT_RUN
        ) from exc
    app = getattr(module, attribute or "app", None)
    if not isinstance(app, App):
        raise CliError(
            f"APP {spec!r} is not a skiplock.App (expected MODULE:ATTRIBUTE)", CANNOT_RUN
        )
    return app


def app_for(app_spec: str, url: str | None) -> App:
    """The app a command acts on: APP imported, or, with ``--url``, a bare App on that
    database (no tasks: enough for queue and job operations, nothing of the user's imported)."""
    if url is None:
        return load_app(app_spec)
    if url == "-":  # a secret kept out of argv, which every user of the host can read
        url = sys.stdin.readline().strip()
    if not url.strip():  # what --url "$DATABASE_URL" passes when the variable is unset
        raise CliError(
            "--url is empty: name the database (sqlite:///path or postgresql://...); "
            "a variable that is unset expands to nothing",
            CANNOT_RUN,
        )
    try:
        return App(url)
    except SkiplockError as exc:
        raise CliError(f"--url: {mask_in(str(exc), url)}", CANNOT_RUN) from exc


class AppCommand(click.Command):
    """A command whose first argument is APP, or whose database is named by ``--url``.

    With ``--url`` the APP argument is left out (``skiplock queue list --url URL``); the
    parser is handed a placeholder in its place so the arguments after it keep their meaning.
    """

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        """The usage line says APP and ``--url`` are alternatives: ``(APP | --url URL)``."""
        pieces = super().collect_usage_pieces(ctx)
        return [USAGE_APP if piece == "APP" else piece for piece in pieces]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        before_dashes = args[: args.index("--")] if "--" in args else args
        if any(a == "--url" or a.startswith("--url=") for a in before_dashes):
            args = [URL_INSTEAD, *args]
        return super().parse_args(ctx, args)


def app_command(group: click.Group | None, name: str) -> Callable[[Callable[..., Any]], Any]:
    """A command (added to ``group`` if given) taking APP, or ``--url URL`` instead, as its
    ``app_spec`` and ``url`` parameters; open the app with ``app_for(app_spec, url)``."""

    def decorate(fn: Callable[..., Any]) -> click.Command:
        fn = click.option(
            "--url",
            help="The database URL, instead of importing APP (operations need no tasks); "
            "- reads it from standard input, so its password stays out of the process list.",
        )(fn)
        fn = click.argument("app_spec", metavar="APP")(fn)
        command = click.command(name=name, cls=AppCommand)(fn)
        if group is not None:
            group.add_command(command)
        return command

    return decorate


# -- running a coroutine --------------------------------------------------------------------

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
            raise ConfigurationError(
                "--loop uvloop: uvloop is not installed (pip install 'skiplock[uvloop]')"
            ) from None
        return None
    return uvloop.new_event_loop


def run_async(
    app: App,
    work: Callable[[], Awaitable[T]],
    *,
    loop: str = "asyncio",
    exit_code: int = REFUSED,
) -> T:
    """Run ``work`` on a fresh event loop and close the app's backend after it.

    A SkiplockError, alone or as the only kind of error in an ExceptionGroup (a worker's
    TaskGroup wraps what its services raise), becomes a CliError with ``exit_code`` (2 for a
    SchemaError), its text with the URL's password masked. Anything else propagates."""

    async def closing() -> T:
        try:
            return await work()
        finally:
            await app.close()

    try:
        with asyncio.Runner(loop_factory=loop_factory(loop)) as runner:
            return runner.run(closing())
    except SkiplockError as exc:
        raise _cli_error(app, exc, exit_code) from exc
    except ExceptionGroup as group:
        only = _sole_skiplock_error(group)
        if only is None:
            raise
        raise _cli_error(app, only, exit_code) from group


def _sole_skiplock_error(group: ExceptionGroup[Exception]) -> SkiplockError | None:
    """The first SkiplockError in ``group`` if it holds nothing else, else None."""
    matched, rest = group.split(SkiplockError)
    if matched is None or rest is not None:
        return None
    leaf: BaseException = matched
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, SkiplockError) else None


def _cli_error(app: App, exc: SkiplockError, exit_code: int) -> CliError:
    code = CANNOT_RUN if isinstance(exc, SchemaError | UrlRefused) else exit_code
    return CliError(mask_in(str(exc), app.url), code)


def exit_before_start(sig: int, _frame: object) -> None:
    """Until the event loop takes signals over, a stop request means "exit before claiming"."""
    logging.getLogger("skiplock").info(
        "received %s before starting; nothing was claimed", signal.Signals(sig).name
    )
    sys.exit(0)


# -- logging --------------------------------------------------------------------------------

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def log_level_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--log-level`` and ``--log-format`` (plain for a person, json lines for a collector)."""
    fn = click.option(
        "--log-format",
        type=click.Choice(FORMATS),
        default="plain",
        show_default=True,
        help="plain text for a person, or one JSON object per line (job events carry job_id, "
        "task, queue, attempt, duration_s, worker, correlation_id; never arguments).",
    )(fn)
    return click.option(
        "--log-level",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default="info",
        show_default=True,
        help="The least severe log records written to stderr.",
    )(fn)


def configure_logging(level: str, log_format: str = "plain") -> None:
    set_up_logging(level=level, format=log_format, stream=sys.stderr)


# -- several databases (issue 46, "one view") -----------------------------------------------


class Down:
    """A database a command could not read or act on: its name and what went wrong."""

    def __init__(self, database: str, error: str) -> None:
        self.database = database
        self.error = error

    def line(self) -> str:
        """One line naming the database and the error."""
        return f"database {self.database}: {self.error}"


def database_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--database NAME``: act on that database of APP alone (every one by default)."""
    return click.option(
        "--database",
        "database",
        metavar="NAME",
        help="Only this database of APP (one of its databases=; 'default' is its own URL). "
        "Every database, one after another, by default.",
    )(fn)


async def each_database(
    app: App, act: Callable[[str], Awaitable[T]], database: str | None = None
) -> list[tuple[str, T | Down]]:
    """``act`` on each database of ``app`` in turn (or ``database`` alone), in the order
    their ids run: a database that fails is a ``Down`` in its place and the others go on.

    A one-database App's failure propagates as before (run_async makes it one line); so does
    an unknown ``database``, before anything is read."""
    names = app.directory.names()
    if database is not None and database not in names:
        raise ConfigurationError(
            f"--database {database!r}: no such database (known: {', '.join(names)})"
        )
    chosen = sorted(names, key=app.directory.number_of) if database is None else [database]
    if not app.directory.several:
        return [(name, await act(name)) for name in chosen]
    done: list[tuple[str, T | Down]] = []
    for name in chosen:
        try:
            done.append((name, await act(name)))
        except ConfigurationError:  # a mistake in what was asked, not a database down
            raise
        except Exception as exc:
            error = mask_in(str(exc) or type(exc).__name__, app.url_of(name))
            done.append((name, Down(name, printable(error))))
    return done


def report_down(parts: list[tuple[str, Any]], *, as_json: bool = False) -> list[Down]:
    """The databases among ``parts`` that failed, each said on stderr (unless ``as_json``,
    whose output carries them); the caller exits 1 if there are any."""
    down = [part for _, part in parts if isinstance(part, Down)]
    if not as_json:
        for part in down:
            click.echo(part.line(), err=True)
    return down
