"""Strict JSON for job arguments: checked at enqueue, checked again when a worker reads them.

Arguments are JSON, never pickle, so a job row can never execute code when it is read. The
rules are PostgreSQL ``jsonb``'s, applied to SQLite too, so a job that enqueues on one backend
enqueues on the other: no NaN or infinity, no ``\\u0000``, no lone surrogates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import PayloadError, PayloadTooLarge

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024

# A \u0000 escape that is not itself an escaped backslash followed by "u0000".
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


# One encoder for every call: ``json.dumps`` with options builds a new one each time.
_dumps = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode


def _name_offender(task: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """Find which argument broke encoding, so the error can point at it."""
    labelled = [(f"positional argument {i}", v) for i, v in enumerate(args)]
    labelled += [(f"argument {k!r}", v) for k, v in kwargs.items()]
    for label, value in labelled:
        try:
            _dumps(value)
        except (TypeError, ValueError):
            return label
    return "an argument"


def encode_args(
    task: str, args: Sequence[Any], kwargs: Mapping[str, Any], max_bytes: int
) -> tuple[str, str]:
    """Encode a call's arguments as two strict JSON texts, or raise naming the culprit."""
    if not args and not kwargs and max_bytes >= 2:
        return "[]", "{}"  # the no-argument call, common in bulk enqueues
    for key in kwargs:
        if not isinstance(key, str):
            raise TypeError(f"task {task!r}: keyword names must be strings, got {key!r}")
    try:
        args_json, kwargs_json = _dumps(list(args)), _dumps(dict(kwargs))
    except TypeError as exc:
        where = _name_offender(task, args, kwargs)
        raise TypeError(f"task {task!r}: {where} is not JSON-serialisable: {exc}") from exc
    except ValueError as exc:
        where = _name_offender(task, args, kwargs)
        raise PayloadError(f"task {task!r}: {where} is not strict JSON: {exc}") from exc
    for text in (args_json, kwargs_json):
        if "\\u0000" in text and _NUL_ESCAPE.search(text):
            raise PayloadError(f"task {task!r}: arguments contain a NUL character (\\u0000)")
        if text.isascii():
            size = len(text)  # no surrogates possible, and one byte a character
        else:
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise PayloadError(f"task {task!r}: arguments contain a lone surrogate") from exc
        if size > max_bytes:
            raise PayloadTooLarge(
                f"task {task!r}: arguments are {size} bytes, over the limit of {max_bytes}"
            )
    return args_json, kwargs_json


def decode_args(args_json: str, kwargs_json: str) -> tuple[list[Any], dict[str, Any]]:
    """Decode a stored payload, refusing anything that is not ``[...]`` and ``{...}``."""
    if args_json == "[]" and kwargs_json == "{}":
        return [], {}  # the no-argument job: two json.loads were 8% of a drain's profile
    try:
        args, kwargs = json.loads(args_json), json.loads(kwargs_json)
    except (TypeError, ValueError) as exc:
        raise PayloadError(f"corrupt payload: {exc}") from exc
    if not isinstance(args, list):
        raise PayloadError(f"corrupt payload: args is a {type(args).__name__}, not a list")
    if not isinstance(kwargs, dict):
        raise PayloadError(f"corrupt payload: kwargs is a {type(kwargs).__name__}, not an object")
    return args, kwargs
