"""Typed arguments and results: a task's parameters (and its return) annotated with a pydantic
v2 model or a dataclass are validated at enqueue, stored as JSON and rebuilt at run.

A module of its own because almost no task needs it, and those must pay nothing: at
``@app.task`` the signature is read once (``typed_signature``); a task none of whose
annotations names a model or a dataclass gets ``Task.typed = None`` and never enters this
module again. pydantic is an optional extra (``skiplock[typed]``) and is imported only here,
only for a task whose annotations name a dataclass or (then already imported) a pydantic
model: ``import skiplock`` never imports it.

What counts as typed: an annotation that names a pydantic ``BaseModel`` subclass or a
dataclass anywhere in it (``Order``, ``list[Order]``, ``Order | None``, ``dict[str, Order]``).
With pydantic installed, each such parameter gets a ``TypeAdapter`` of its annotation: any
shape pydantic validates, the fields' types checked. Without it, a plain dataclass (the
annotation ``D`` or ``D | None``) is still carried, by a small converter: ``asdict`` at
enqueue, ``D(**fields)`` at run, nested dataclass fields rebuilt, the other fields passed as
the JSON gave them (their types are not checked); any other shape naming a dataclass is a
ConfigurationError at registration saying to install ``skiplock[typed]``.

Annotations are resolved with the task function's globals (``from __future__ import
annotations`` is fine); one that cannot be resolved there (a name imported only under
``TYPE_CHECKING``) leaves that parameter untyped, as before.

Where the rest of skiplock calls in: ``Task.prepare_call`` (``dump_call``: the model instances
or dicts validated, dumped to JSON values, a failure an ``ArgumentInvalid`` before anything is
written); the worker's ``resolve`` and the eager mode (``load_call``, after the upcasters: a
failure sends the job to dead at once, as any payload that cannot run does); the result's
store (``dump_result``) and ``JobHandle.result()`` (``load_result``); ``task list --json``
(``schemas``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import ArgumentInvalid, ConfigurationError


class Codec(Protocol):
    """How one annotation's values become JSON values and back."""

    def dump(self, value: Any) -> Any: ...

    def load(self, data: Any) -> Any: ...

    def schema(self) -> dict[str, Any]: ...


class Invalid(Exception):
    """A value that does not fit its annotation: ``path`` is the field (``items.0.qty``),
    empty when the value as a whole does not fit."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message

    def where(self) -> str:
        return f"field {self.path}: {self.message}" if self.path else self.message


# -- pydantic ---------------------------------------------------------------------------------


class _Adapted:
    """A pydantic ``TypeAdapter`` of the annotation (models, dataclasses, and any shape)."""

    def __init__(self, annotation: Any) -> None:
        from pydantic import TypeAdapter

        self.adapter: Any = TypeAdapter(annotation)

    def dump(self, value: Any) -> Any:
        return self.adapter.dump_python(self.load(value), mode="json")

    def load(self, data: Any) -> Any:
        from pydantic import ValidationError

        try:
            return self.adapter.validate_python(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            path = ".".join(str(part) for part in first["loc"])
            more = exc.error_count() - 1
            message = str(first["msg"]) + (f" (and {more} more)" if more else "")
            raise Invalid(path, message) from None

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = self.adapter.json_schema()
        return schema


# -- plain dataclasses, without pydantic --------------------------------------------------------


class _Plain:
    """A dataclass ``cls`` (or ``cls | None``) without pydantic: ``asdict`` out, ``cls(**)``
    back, its dataclass fields rebuilt in turn; other fields as the JSON gave them."""

    def __init__(
        self, cls: type, optional: bool, made: dict[tuple[type, bool], _Plain] | None = None
    ) -> None:
        self.cls = cls
        self.optional = optional
        made = {} if made is None else made
        made[cls, optional] = self  # a dataclass that holds itself (a tree) reuses this one
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # a field's annotation cannot be resolved: passed as the JSON gave it
            hints = {}
        self.nested: dict[str, _Plain] = {}
        for f in dataclasses.fields(cls):
            inner = _plain_target(hints.get(f.name, Any))
            if inner is not None:
                self.nested[f.name] = made.get(inner) or _Plain(*inner, made)

    def dump(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if isinstance(value, dict):
            value = self.load(value)  # a dict must build one; what it builds is stored
        if not isinstance(value, self.cls):
            raise Invalid("", f"expected {self.cls.__name__}, got {type(value).__name__}")
        return dataclasses.asdict(typing.cast(Any, value))

    def load(self, data: Any) -> Any:
        if data is None and self.optional:
            return None
        if not isinstance(data, dict):
            raise Invalid("", f"expected an object for {self.cls.__name__}, got {data!r}")
        fields = dict(data)
        for name, codec in self.nested.items():
            if name in fields:
                try:
                    fields[name] = codec.load(fields[name])
                except Invalid as exc:
                    raise Invalid(_join(name, exc.path), exc.message) from None
        try:
            return self.cls(**fields)
        except TypeError as exc:
            raise Invalid("", f"{self.cls.__name__}: {exc}") from None

    def schema(self, inside: frozenset[type] = frozenset()) -> dict[str, Any]:
        """A JSON Schema of the fields (a dataclass inside itself: ``{"type": "object"}``)."""
        schema: dict[str, Any] = {"title": self.cls.__name__, "type": "object"}
        if self.cls not in inside:
            below = inside | {self.cls}
            schema["properties"] = {
                f.name: self.nested[f.name].schema(below) if f.name in self.nested else {}
                for f in dataclasses.fields(self.cls)
            }
            schema["required"] = [
                f.name
                for f in dataclasses.fields(self.cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            ]
        return {"anyOf": [schema, {"type": "null"}]} if self.optional else schema


def _join(head: str, tail: str) -> str:
    return f"{head}.{tail}" if tail else head


def _plain_target(annotation: Any) -> tuple[type, bool] | None:
    """``(cls, optional)`` when the annotation is a dataclass or ``dataclass | None``."""
    if _is_dataclass_type(annotation):
        return annotation, False
    if _is_union(annotation):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        if len(members) == 1 and optional and _is_dataclass_type(members[0]):
            return members[0], True
    return None


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _is_dataclass_type(annotation: Any) -> bool:
    return isinstance(annotation, type) and dataclasses.is_dataclass(annotation)


# -- which annotations are typed ------------------------------------------------------------


def _names_a_model(annotation: Any, depth: int = 0) -> bool:
    """Whether a pydantic model or a dataclass appears anywhere in the annotation."""
    if depth > 20:
        return False
    if isinstance(annotation, type):
        if dataclasses.is_dataclass(annotation):
            return True
        pydantic = sys.modules.get("pydantic")  # no model can exist unless it was imported
        try:
            if pydantic is not None and issubclass(annotation, pydantic.BaseModel):
                return True
        except TypeError:  # a generic alias that passes for a type
            pass
    return any(_names_a_model(a, depth + 1) for a in typing.get_args(annotation))


def _pydantic_installed() -> bool:
    try:
        import pydantic  # noqa: F401
    except ImportError:
        return False
    return True


def codec_for(task: str, where: str, annotation: Any) -> Codec:
    """The codec of one typed annotation (``where`` names it in a ConfigurationError)."""
    if _pydantic_installed():
        try:
            return _Adapted(annotation)
        except Exception as exc:  # pydantic cannot build a validator for it
            raise ConfigurationError(
                f"task {task!r}: {where}: pydantic cannot validate {annotation!r}: {exc}"
            ) from exc
    plain = _plain_target(annotation)
    if plain is None:
        raise ConfigurationError(
            f"task {task!r}: {where} is annotated {annotation!r}: without pydantic only a "
            "dataclass (or dataclass | None) is carried; install skiplock[typed] for this"
        )
    return _Plain(*plain)


def _hints(fn: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    """Each annotation resolved (string ones in the function's globals); one that cannot be
    resolved there is left out (its parameter stays untyped)."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # one unresolvable name: resolve the others one by one
        pass
    space = getattr(fn, "__globals__", {})
    found: dict[str, Any] = {}
    annotated = {p.name: p.annotation for p in signature.parameters.values()}
    annotated["return"] = signature.return_annotation
    for name, annotation in annotated.items():
        if annotation is inspect.Parameter.empty:
            continue
        try:
            found[name] = eval(annotation, space) if isinstance(annotation, str) else annotation
        except Exception:  # a TYPE_CHECKING-only name, say: untyped, as before
            continue
    return found


@dataclass(frozen=True, slots=True)
class Typed:
    """The typed parameters of one task's signature, and its typed return."""

    positional: tuple[tuple[str, Codec | None], ...]
    """The parameters a positional argument can fill, in order (None: untyped)."""
    var_positional: tuple[str, Codec] | None
    keyword: dict[str, Codec]
    """The typed parameters a keyword argument can name."""
    var_keyword: tuple[str, Codec] | None
    result: Codec | None
    names: tuple[str, ...]
    """Every parameter, in order (``schemas`` lists each)."""

    def dump_call(
        self, task: str, args: Sequence[Any], kwargs: dict[str, Any], leading: int = 0
    ) -> tuple[list[Any], dict[str, Any]]:
        """The call's arguments as JSON values; ArgumentInvalid naming the argument and field.
        ``leading``: positional arguments that come later (a workflow step's)."""
        try:
            return self._convert(args, kwargs, leading, dumping=True)
        except _At as exc:
            raise ArgumentInvalid(
                f"task {task!r}: argument {exc.name!r}: {exc.invalid.where()} "
                "(nothing was enqueued)"
            ) from None

    def load_call(
        self, task: str, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """The stored arguments rebuilt as the annotations say; ArgumentInvalid if they no
        longer fit (the worker sends the job to dead with it)."""
        try:
            return self._convert(args, kwargs, 0, dumping=False)
        except _At as exc:
            raise ArgumentInvalid(
                f"task {task!r}: stored argument {exc.name!r} does not fit its annotation: "
                f"{exc.invalid.where()}"
            ) from None

    def _convert(
        self, args: Sequence[Any], kwargs: dict[str, Any], leading: int, *, dumping: bool
    ) -> tuple[list[Any], dict[str, Any]]:
        out_args = list(args)
        for i, value in enumerate(args):
            index = i + leading
            if index < len(self.positional):
                name, codec = self.positional[index]
            elif self.var_positional is not None:
                name, codec = self.var_positional
                name = f"{name}[{index - len(self.positional)}]"
            else:
                continue  # a misfit: the signature check says so
            if codec is not None:
                out_args[i] = _apply(codec, name, value, dumping)
        out_kwargs = dict(kwargs)
        for name, value in kwargs.items():
            codec = self.keyword.get(name)
            if codec is None and self.var_keyword is not None and name not in self.names:
                codec = self.var_keyword[1]
            if codec is not None:
                out_kwargs[name] = _apply(codec, name, value, dumping)
        return out_args, out_kwargs

    def dump_result(self, task: str, value: Any) -> Any:
        """The return value as JSON values (TypeError naming the task if it does not fit)."""
        if self.result is None:
            return value
        try:
            return self.result.dump(value)
        except Invalid as exc:
            raise TypeError(
                f"task {task!r}: its result does not fit its annotation: {exc.where()}"
            ) from None

    def load_result(self, value: Any) -> Any:
        """The stored result rebuilt as the return annotation says (as stored if it no
        longer fits: the read must not fail on what the job did)."""
        if self.result is None:
            return value
        try:
            return self.result.load(value)
        except Invalid:
            return value

    def schemas(self) -> dict[str, Any]:
        """Each parameter's JSON Schema (``{}``: any JSON value), and the return's."""
        codecs = dict(self.positional) | self.keyword
        if self.var_positional is not None:
            codecs[self.var_positional[0]] = self.var_positional[1]
        if self.var_keyword is not None:
            codecs[self.var_keyword[0]] = self.var_keyword[1]
        arguments = {}
        for name in self.names:
            codec = codecs.get(name)
            arguments[name] = {} if codec is None else codec.schema()
        return {
            "arguments": arguments,
            "returns": None if self.result is None else self.result.schema(),
        }


class _At(Exception):
    def __init__(self, name: str, invalid: Invalid) -> None:
        self.name = name
        self.invalid = invalid


def _apply(codec: Codec, name: str, value: Any, dumping: bool) -> Any:
    try:
        return codec.dump(value) if dumping else codec.load(value)
    except Invalid as exc:
        raise _At(name, exc) from None


def typed_signature(task: str, fn: Callable[..., Any]) -> Typed | None:
    """The typed parts of ``fn``'s signature, or None when it has none (the plain path).
    Cached per function: ``Task.using`` copies rebuild the task, not this."""
    try:
        return _typed_signature(task, fn)
    except TypeError:  # an unhashable callable: not cached
        return _typed_signature.__wrapped__(task, fn)


@functools.lru_cache(maxsize=1024)
def _typed_signature(task: str, fn: Callable[..., Any]) -> Typed | None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    if not _any_annotation(signature):
        return None
    hints = _hints(fn, signature)
    if not any(_names_a_model(h) for h in hints.values()):
        return None
    codecs: dict[str, Codec] = {}
    for name, annotation in hints.items():
        if _names_a_model(annotation):
            where = "its return" if name == "return" else f"parameter {name!r}"
            codecs[name] = codec_for(task, where, annotation)
    kinds = inspect.Parameter
    params = list(signature.parameters.values())
    positional = tuple(
        (p.name, codecs.get(p.name))
        for p in params
        if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
    )
    keyword = {
        p.name: codecs[p.name]
        for p in params
        if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY) and p.name in codecs
    }
    star = [p.name for p in params if p.kind is kinds.VAR_POSITIONAL and p.name in codecs]
    stars = [p.name for p in params if p.kind is kinds.VAR_KEYWORD and p.name in codecs]
    return Typed(
        positional=positional,
        var_positional=(star[0], codecs[star[0]]) if star else None,
        keyword=keyword,
        var_keyword=(stars[0], codecs[stars[0]]) if stars else None,
        result=codecs.get("return"),
        names=tuple(p.name for p in params),
    )


def _any_annotation(signature: inspect.Signature) -> bool:
    if signature.return_annotation is not inspect.Signature.empty:
        return True
    return any(p.annotation is not inspect.Parameter.empty for p in signature.parameters.values())


def argument_schemas(fn: Callable[..., Any], typed: Typed | None) -> dict[str, Any]:
    """``task list --json``'s ``arguments`` (each parameter's JSON Schema, ``{}`` for any
    JSON value) and ``returns`` (the return's, or None when it is not typed)."""
    if typed is not None:
        return typed.schemas()
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return {"arguments": {name: {} for name in names}, "returns": None}
