"""Strict JSON for job arguments: checked at enqueue, checked again when a worker reads them.

Arguments are JSON, never pickle, so a job row can never execute code when it is read. The
rules are PostgreSQL ``jsonb``'s, applied to SQLite too, so a job that enqueues on one backend
enqueues on the other: no NaN or infinity, no ``\\u0000``, no lone surrogates. Beyond jsonb,
object keys must be strings (``{1: "a", "1": "b"}`` would silently arrive as ``{"1": "b"}``)
and nesting is at most ``MAX_DEPTH`` deep (deeper blows the decoder's recursion, in a worker).
Tuples are accepted and arrive as lists, as JSON has only one sequence type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import PayloadError, PayloadTooLarge

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024

DEFAULT_MAX_RESULT_BYTES = 256 * 1024
"""The default largest return value a job may store (``App(max_result_bytes=...)``)."""

MAX_DEPTH = 100
"""The deepest nesting of lists and objects in arguments (the call's own list counts as 1).
Real arguments stay far below it; the stdlib decoder fails near 1,000, in the worker."""

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
    try:  # no keywords (most calls): their text without an encoder call or its checks
        args_json = _dumps(list(args))
        kwargs_json = _dumps(dict(kwargs)) if kwargs else "{}"
    except TypeError as exc:
        where = _name_offender(task, args, kwargs)
        raise TypeError(f"task {task!r}: {where} is not JSON-serialisable: {exc}") from exc
    except ValueError as exc:
        where = _name_offender(task, args, kwargs)
        raise PayloadError(f"task {task!r}: {where} is not strict JSON: {exc}") from exc
    except RecursionError as exc:
        raise PayloadError(f"task {task!r}: arguments nest deeper than {MAX_DEPTH}") from exc
    _check_text(task, args_json, max_bytes)
    if kwargs:
        _check_text(task, kwargs_json, max_bytes)
    if _may_hide_a_bad_shape(args_json, kwargs_json):
        _check_shape(task, args, kwargs)
    return args_json, kwargs_json


def _check_text(task: str, text: str, max_bytes: int) -> None:
    """What jsonb refuses (NUL, lone surrogates) and the size limit, on the encoded text."""
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


def encode_result(
    task: str,
    value: Any,
    max_bytes: int,
    *,
    subject: str | None = None,
    limit: str = "max_result_bytes",
) -> str | None:
    """A task's return value as strict JSON under the same rules as arguments (None stays
    None: no text to store), or raise TypeError / PayloadError naming the task and the type
    (``subject`` names something else the rule checks, such as a signal's payload, and
    ``limit`` the setting its size is bounded by)."""
    if value is None:
        return None
    kind = type(value).__name__
    what = f"its result ({kind})"
    where = f"{subject} ({kind})" if subject else f"task {task!r}: {what}"
    try:
        text = _dumps(value)
    except TypeError as exc:
        raise TypeError(f"{where} is not JSON-serialisable: {exc}") from exc
    except ValueError as exc:
        raise PayloadError(f"{where} is not strict JSON: {exc}") from exc
    except RecursionError:
        raise PayloadError(f"{where} nests too deep") from None
    try:
        _check_text(task, text, max_bytes)
        if _may_hide_a_bad_shape(text, "{}"):
            _check_shape(task, [value], {})
    except PayloadError as exc:
        said = str(exc).replace("arguments", what, 1)
        if subject:
            said = said.replace(f"task {task!r}: {what}", f"{subject} ({kind})", 1)
        raise type(exc)(said.replace("the limit", limit, 1)) from None
    return text


def _may_hide_a_bad_shape(args_json: str, kwargs_json: str) -> bool:
    """Whether the arguments need a walk: an object below the top, or enough brackets to nest
    past MAX_DEPTH. Two C-speed scans spare the common flat call any Python-level walk."""
    if "{" in args_json or kwargs_json.find("{", 1) != -1:
        return True
    if len(args_json) + len(kwargs_json) <= MAX_DEPTH:
        return False  # too short to hold MAX_DEPTH brackets
    return args_json.count("[") + kwargs_json.count("[") > MAX_DEPTH


def _check_shape(task: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Refuse non-string object keys and nesting deeper than MAX_DEPTH, without recursion.

    Level by level, pushing only containers: a nested payload costs about what encoding it did.
    """
    level: list[Any] = [args, kwargs]
    for _depth in range(MAX_DEPTH):
        below: list[Any] = []
        for value in level:
            if isinstance(value, dict):
                for key in value:
                    if not isinstance(key, str):
                        raise PayloadError(
                            f"task {task!r}: object key {key!r} is not a string "
                            "(JSON would turn it into one, silently)"
                        )
                below += [v for v in value.values() if isinstance(v, _CONTAINERS)]
            else:
                below += [v for v in value if isinstance(v, _CONTAINERS)]
        if not below:
            return
        level = below
    raise PayloadError(f"task {task!r}: arguments nest deeper than {MAX_DEPTH}")


_CONTAINERS = (dict, list, tuple)


def decode_args(args_json: str, kwargs_json: str) -> tuple[list[Any], dict[str, Any]]:
    """Decode a stored payload, refusing anything that is not ``[...]`` and ``{...}``."""
    if args_json == "[]" and kwargs_json == "{}":
        return [], {}  # the no-argument job: two json.loads were 8% of a drain's profile
    try:
        args, kwargs = json.loads(args_json), json.loads(kwargs_json)
    except RecursionError as exc:
        raise PayloadError("corrupt payload: nested too deep to decode") from exc
    except Exception as exc:  # any row another producer wrote: a reason, never a crash
        raise PayloadError(f"corrupt payload: {type(exc).__name__}: {exc}") from exc
    if not isinstance(args, list):
        raise PayloadError(f"corrupt payload: args is a {type(args).__name__}, not a list")
    if not isinstance(kwargs, dict):
        raise PayloadError(f"corrupt payload: kwargs is a {type(kwargs).__name__}, not an object")
    return args, kwargs
