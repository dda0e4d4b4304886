"""``skiplock worker``'s options, generated from ``WorkerConfig`` (issue 10 §4).

Every field becomes an option, so a default, a rule and a help text are written once, on the
field: the flag is the field's name in kebab case without a trailing ``_s`` (the unit suffix of
durations: ``poll_interval_s`` -> ``--poll-interval``), the help is the field's docstring, and
the value is checked by ``WorkerConfig`` itself, its error reported against the flag.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

import click

from .._config import WorkerConfig
from ..errors import ConfigurationError
from .support import CANNOT_RUN, CliError

F = TypeVar("F", bound=Callable[..., Any])

SHORT = {"queues": "-q", "concurrency": "-c"}
"""The one-letter forms people already type."""


def flag(field_name: str) -> str:
    """``poll_interval_s`` -> ``--poll-interval``."""
    return "--" + field_name.removesuffix("_s").replace("_", "-")


@cache
def field_docs() -> dict[str, str]:
    """Each field's docstring (the string right after it in the class body), read once."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(WorkerConfig)))
    except (OSError, TypeError, SyntaxError):  # no source shipped: help without the text
        return {}
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, following in itertools.pairwise(body):
        named = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        documented = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
        if named and documented:
            text = " ".join(str(following.value.value).split())  # type: ignore[attr-defined]
            docs[node.target.id] = text.replace("``", "")  # type: ignore[attr-defined]  # no reST in --help
    return docs


def _split_queues(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> tuple[str, ...] | None:
    if not value:
        return None
    return tuple(q.strip() for q in value.split(",") if q.strip()) or None


def _option(field: dataclasses.Field[Any], kind: Any) -> Callable[[F], F]:
    """The click option for one field, typed from its annotation."""
    names = [flag(field.name), *([SHORT[field.name]] if field.name in SHORT else [])]
    help_text = field_docs().get(field.name, "")
    default = field.default
    if kind is bool:
        negative = "--no-" + flag(field.name).removeprefix("--")
        return click.option(
            f"{names[0]}/{negative}",
            field.name,
            default=default,
            show_default=True,
            help=help_text,
        )
    if field.name == "queues":
        help_text = "Comma-separated queues to work (default: all)."
        return click.option(
            *names, field.name, default=None, callback=_split_queues, help=help_text
        )
    if typing.get_origin(kind) is typing.Literal:  # a choice of words: --sync-executor
        return click.option(
            *names,
            field.name,
            type=click.Choice([str(w) for w in typing.get_args(kind)]),
            default=default,
            show_default=True,
            help=help_text,
        )
    optional = type(None) in typing.get_args(kind)
    base = next((a for a in typing.get_args(kind) if a is not type(None)), kind)
    return click.option(
        *names,
        field.name,
        type=base if base in (int, float, str) else str,
        metavar="SECONDS" if field.name.endswith("_s") else None,
        default=default,
        show_default=not optional and default != "",
        help=help_text,
    )


def worker_config_options(fn: F) -> F:
    """Decorate a command with one option per ``WorkerConfig`` field, in field order; the
    command receives them as keyword arguments named like the fields."""
    hints = typing.get_type_hints(WorkerConfig)
    for field in reversed(dataclasses.fields(WorkerConfig)):
        fn = _option(field, hints[field.name])(fn)
    return fn


def build_config(values: dict[str, Any]) -> WorkerConfig:
    """``WorkerConfig(**values)``; its ConfigurationError names the flag and exits 2."""
    try:
        return WorkerConfig(**values)
    except ConfigurationError as exc:
        field_name = str(exc).split("=", 1)[0]
        prefix = f"{flag(field_name)}: " if field_name in values else ""
        raise CliError(f"{prefix}{exc}", CANNOT_RUN) from exc
