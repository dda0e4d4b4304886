"""Strict JSON at the edge: every rule, and the error naming the culprit."""

from __future__ import annotations

import datetime
import json

import pytest

from skiplock import PayloadError, PayloadTooLarge
from skiplock._payload import MAX_DEPTH, decode_args, encode_args


def test_round_trip() -> None:
    args, kwargs = encode_args("t", [1, "é", None, [1.5]], {"k": {"a": True}}, 1000)
    assert decode_args(args, kwargs) == ([1, "é", None, [1.5]], {"k": {"a": True}})


def test_non_json_argument_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match=r"argument 'when' is not JSON-serialisable"):
        encode_args("t", [1], {"when": datetime.date(2024, 1, 1)}, 1000)
    with pytest.raises(TypeError, match=r"positional argument 1 is not JSON-serialisable"):
        encode_args("t", [1, {1, 2}], {}, 1000)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_refused(value: float) -> None:
    with pytest.raises(PayloadError, match="not strict JSON"):
        encode_args("t", [value], {}, 1000)


def test_nul_and_lone_surrogates_are_refused() -> None:
    with pytest.raises(PayloadError, match="NUL"):
        encode_args("t", ["a\x00b"], {}, 1000)
    with pytest.raises(PayloadError, match="surrogate"):
        encode_args("t", ["\ud800"], {}, 1000)


def test_an_escaped_backslash_before_u0000_is_not_a_nul() -> None:
    args, _ = encode_args("t", ["\\u0000"], {}, 1000)
    assert json.loads(args) == ["\\u0000"]


def test_size_limit() -> None:
    encode_args("t", ["x" * 90], {}, 100)
    with pytest.raises(PayloadTooLarge, match="over the limit of 100"):
        encode_args("t", ["x" * 100], {}, 100)


def test_non_string_keyword_names_are_refused() -> None:
    with pytest.raises(TypeError, match="keyword names must be strings"):
        encode_args("t", [], {1: "a"}, 1000)  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("args", "kwargs", "why"),
    [
        ("{not json", "{}", "corrupt payload"),
        ('{"a": 1}', "{}", "args is a dict"),
        ("[]", "[1]", "kwargs is a list"),
    ],
)
def test_decode_refuses_corrupt_payloads(args: str, kwargs: str, why: str) -> None:
    with pytest.raises(PayloadError, match=why):
        decode_args(args, kwargs)


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_DEPTH, 1_000, 10_000])
def test_deep_nesting_is_a_payload_error_naming_the_limit(depth: int) -> None:
    with pytest.raises(PayloadError, match=f"deeper than {MAX_DEPTH}"):
        encode_args("t", [_nested(depth)], {}, 10**7)
    with pytest.raises(PayloadError, match=f"deeper than {MAX_DEPTH}"):
        encode_args("t", [], {"k": {"a": _nested(depth)}}, 10**7)


def test_nesting_up_to_the_limit_is_accepted() -> None:
    args, kwargs = encode_args("t", [_nested(MAX_DEPTH - 1)], {}, 10**7)
    assert decode_args(args, kwargs)[0] == [_nested(MAX_DEPTH - 1)]


@pytest.mark.parametrize(
    "value", [{1: "a", "1": "b"}, {"k": {2: "x"}}, [{None: 1}], {"a": [{1.5: 0}]}, {True: 1}]
)
def test_non_string_object_keys_are_refused(value: object) -> None:
    with pytest.raises(PayloadError, match="is not a string"):
        encode_args("t", [value], {}, 1000)
    with pytest.raises(PayloadError, match="is not a string"):
        encode_args("t", [], {"k": value}, 1000)


def test_tuples_arrive_as_lists() -> None:
    args, kwargs = encode_args("t", [(1, (2, 3))], {"k": ("a",)}, 1000)
    assert decode_args(args, kwargs) == ([[1, [2, 3]]], {"k": ["a"]})


@pytest.mark.parametrize(
    "args_json",
    ["[" * 10_000 + "]" * 10_000, "[1e999999]", b"\xff\xfe[]", '["\\ud800"]x', None],
    ids=["deep", "huge-exponent", "binary", "trailing", "null"],
)
def test_any_decoding_failure_is_a_payload_error(args_json: object) -> None:
    try:
        decode_args(args_json, "{}")  # type: ignore[arg-type]
    except PayloadError as exc:
        assert "corrupt payload" in str(exc)
