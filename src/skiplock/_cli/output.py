"""What the commands print: ``echo`` for a person, ``echo_json`` for a script.

``echo`` (every human-format line) shows the control characters a value holds instead of
sending them to the terminal (``skiplock._printable``: a job's error, a queue, task or worker
name, a key, come from whoever enqueued or ran the job, and an escape sequence in one would
retitle the terminal or rewrite the line); docs/operations/cli.md, "Control characters".

``--json``: one object per command (never a bare list, so a key can be added without breaking
a script), datetimes as ISO 8601 strings with their offset, keys in a fixed order; each
command's keys are documented in docs/operations/cli.md and tested there. JSON escapes every
control character itself, so a script reads the exact value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .._printable import printable

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["echo", "echo_json", "json_option", "printable", "to_json"]


def echo(text: str = "", *, err: bool = False, multiline: bool = False) -> None:
    """Print one line for a person (stdout, or stderr with ``err``), its control characters
    shown, never sent to the terminal (``printable``)."""
    click.echo(printable(text, multiline=multiline), err=err)


def _iso(value: object) -> str:
    """A datetime (anything with ``isoformat``) as ISO 8601; anything else as its str."""
    isoformat = getattr(value, "isoformat", None)
    return str(isoformat()) if callable(isoformat) else str(value)


def to_json(value: object, *, indent: int | None = None) -> str:
    """``value`` as JSON, datetimes as ISO 8601 strings."""
    return json.dumps(value, default=_iso, indent=indent)


def echo_json(value: object) -> None:
    """Print ``value`` as one line of JSON on stdout."""
    click.echo(to_json(value))


def json_option(fn: F) -> F:
    """``--json``: the command's output as one JSON object (its keys: docs/operations/cli.md);
    the command receives it as ``as_json``."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print one JSON object instead (keys listed in the docs), for scripts.",
    )(fn)
