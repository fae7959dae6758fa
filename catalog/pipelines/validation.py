"""What floe.yaml's pydantic models share: the base model, the parse context, reusable value types, and
the translation of pydantic's errors into floe's `ConfigError`s.

Every model is strict (no coercion: `port: "9092"` is an error, as a string is not a number) and forbids
unknown keys. Pydantic validates every value and reports every problem; floe's own rules raise
`PydanticCustomError`s whose message is final. Rules that span the document (a table names a cluster
defined elsewhere, field ids unique across a whole schema) keep what they saw in the `ParseContext`, so
they work even where other parts of the document are invalid. The context also knows the YAML path of
every mapping of the input (pydantic hands each model the very object it reads), which the models keep
(`.path`) for messages such as "also at tables[0]" and for later errors about existing tables.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args

import annotated_types
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from catalog.pipelines.errors import ConfigError
from catalog.pipelines.yaml_values import describe_value, key_path, parent_path

Loc = tuple[str | int, ...]
_FLOE_ERROR = "floe"


def problem(message: str) -> PydanticCustomError:
    """One of floe's own messages as a pydantic error (passed through unchanged, never formatted)."""
    return PydanticCustomError(_FLOE_ERROR, message)


def problems(found: Sequence[tuple[Loc, str]]) -> ValidationError:
    """Several messages at once, each at a location relative to the value being validated."""
    return ValidationError.from_exception_data(
        "floe.yaml", [InitErrorDetails(type=problem(message), loc=loc, input=None) for loc, message in found]
    )


@dataclass
class ParseContext:
    """What one parse has seen so far (pydantic validates fields in declaration order, depth first)."""

    paths: dict[int, str] = field(default_factory=dict)  # id() of every mapping and list → its path
    order: dict[str, int] = field(default_factory=dict)  # path → position in the document
    stack: list[str] = field(default_factory=list)  # paths of the models being validated
    clusters: dict[str, str] = field(default_factory=dict)  # valid source cluster names → path
    registry_url: str | None = None  # the top-level schema_registry.url, once valid
    field_ids: dict[int, str] = field(default_factory=dict)  # ids of the schema being read → path
    field_names: dict[str, dict[str, str]] = field(default_factory=dict)  # parent path → name → path
    parsed: dict[str, BaseModel] = field(default_factory=dict)  # path → the valid block there

    @classmethod
    def of(cls, data: Any) -> ParseContext:
        context = cls()
        context._visit(data, "")
        return context

    def _visit(self, value: Any, path: str) -> None:
        self.order.setdefault(path, len(self.order))
        if isinstance(value, dict):
            self.paths.setdefault(id(value), path)
            for key, item in value.items():
                self._visit(item, key_path(path, str(key)))
        elif isinstance(value, list):
            self.paths.setdefault(id(value), path)
            for index, item in enumerate(value):
                self._visit(item, f"{path}[{index}]")

    @property
    def path(self) -> str:
        """The path of the model being validated."""
        return self.stack[-1] if self.stack else ""

    def position(self, path: str) -> int:
        """Where `path` (or the nearest value above it) is in the document."""
        while path not in self.order and path:
            path = parent_path(path)
        return self.order.get(path, len(self.order))


def context_of(info: ValidationInfo) -> ParseContext | None:
    return info.context if isinstance(info.context, ParseContext) else None


class ConfigModel(BaseModel):
    """A floe.yaml block: strict, unknown keys refused, immutable; knows its YAML path."""

    model_config = ConfigDict(
        strict=True, extra="forbid", frozen=True, hide_input_in_errors=True, validate_by_name=False
    )
    _path: str = PrivateAttr(default="")

    @property
    def path(self) -> str:
        """Where this block was in the document (`tables[1].schema.fields[3]`); "" when not parsed."""
        return self._path

    @model_validator(mode="wrap")
    @classmethod
    def _locate(cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        context = context_of(info)
        path = context.paths.get(id(data), "") if context is not None else ""
        if context is not None:
            context.stack.append(path)
        try:
            model = handler(data)
        finally:
            if context is not None:
                context.stack.pop()
        if isinstance(model, ConfigModel) and not model._path:
            model._path = path
        if context is not None and path:
            context.parsed[path] = model
        return model

    def to_json(self) -> dict[str, Any]:
        """The normalized form (defaults explicit, unset optional keys left out); parses back equal."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    # Equal when the configuration is: where it was written (`path`) does not count.
    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, name) == getattr(other, name) for name in type(self).model_fields
        )

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in type(self).model_fields))


# -- value types -----------------------------------------------------------------------------------


def expected_string(value: Any) -> str:
    hint = " (quote it: YAML read it as another type)" if isinstance(value, bool | int | float) else ""
    return f"expected a string; got {describe_value(value)}{hint}"


def _not_empty(value: str) -> str:
    if not value.strip():
        raise problem("must not be empty")
    return value


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise problem(
            f"{value!r} is not an environment variable name (letters, digits and '_'): "
            "name the variable that holds the value, never the value itself"
        )
    return value


def _http_url(value: str) -> str:
    from urllib.parse import urlsplit

    parsed = urlsplit(value)
    if "@" in parsed.netloc:  # checked first: the refusal must not echo the password
        raise problem(
            "a URL must not hold credentials (user:password@): name them in the credentials fields "
            "(basic_auth_username_env and basic_auth_password_env for a schema registry)"
        )
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise problem(f"expected an http:// or https:// URL; got {value!r}")
    return value.rstrip("/")


Text = Annotated[str, AfterValidator(_not_empty)]
"""A non-blank string."""
EnvName = Annotated[str, AfterValidator(_not_empty), AfterValidator(_env_name)]
"""The name of an environment variable that holds a secret (never the secret)."""
HttpUrl = Annotated[str, AfterValidator(_not_empty), AfterValidator(_http_url)]
"""An http(s) URL, trailing `/` removed."""


def choose(value: Any, choices: Sequence[str], aliases: Mapping[str, str] | None = None) -> str:
    """`value` as one of `choices`, in any letter case (`aliases` name some differently)."""
    if not isinstance(value, str):
        raise problem(expected_string(value))
    if not value.strip():
        raise problem("must not be empty")
    name = value.strip().lower()
    name = (aliases or {}).get(name, name)
    if name not in choices:
        raise problem(f"expected one of {', '.join(choices)}; got {name!r}")
    return name


def choice(choices: Sequence[str], aliases: Mapping[str, str] | None = None) -> BeforeValidator:
    """`choose` as a validator that goes before a `Literal` of the same choices (WarpStream writes
    `sasl_mechanism: plain`, the Kafka clients `SCRAM-SHA-256`)."""
    return BeforeValidator(lambda value: choose(value, choices, aliases))


def _non_empty_list(value: Any) -> Any:
    # Not `min_length`: pydantic counts only the valid items, so one bad item would also read as empty.
    if isinstance(value, list | tuple) and not value:
        raise problem("must not be empty")
    return value


NonEmpty = BeforeValidator(_non_empty_list)
"""A list that must have items (goes first in `Annotated[tuple[X, ...], NonEmpty, …]`)."""


def none_as_empty(value: Any) -> Any:
    """An empty YAML block (`credentials:`) sets nothing."""
    return {} if value is None else value


# -- pydantic's errors as floe's -------------------------------------------------------------------


def to_config_errors(exc: ValidationError, root: type[BaseModel]) -> list[ConfigError]:
    """Each of pydantic's errors at its YAML path, in floe's words (the input value is shown only as
    floe's messages always showed it)."""
    return [ConfigError(yaml_path(error["loc"]), _message(error, root)) for error in exc.errors()]


def yaml_path(loc: Loc) -> str:
    path = ""
    for step in loc:
        path = f"{path}[{step}]" if isinstance(step, int) else key_path(path, step)
    return path


def _message(error: ErrorDetails, root: type[BaseModel]) -> str:
    kind, loc, value = error["type"], error["loc"], error.get("input")
    if kind == _FLOE_ERROR:
        return error["msg"]
    if kind == "missing":
        return f"{loc[-1]} is required"
    if kind == "extra_forbidden":
        allowed = _keys(_model_at(root, loc[:-1]))
        key = str(loc[-1])
        hint = difflib.get_close_matches(key, allowed, n=1)
        suggestion = f"; did you mean {hint[0]!r}?" if hint else f" (expected: {', '.join(allowed)})"
        return f"unknown key {key!r}{suggestion}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        keys = ", ".join(_keys(_model_at(root, loc)))
        return f"expected a mapping with keys {keys}; got {describe_value(value)}"
    if kind == "string_type":
        return expected_string(value)
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected an integer; got {describe_value(value)}"
    if kind in ("float_type", "float_parsing"):
        return f"expected a number; got {describe_value(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false; got {describe_value(value)}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list; got {describe_value(value)}"
    if kind == "too_short":
        return "must not be empty"
    if kind in ("greater_than_equal", "less_than_equal"):
        low, high = _limits(_field_at(root, loc))
        return f"must be between {low} and {high}; got {value}"
    return str(error["msg"])


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds (`X`, `X | None`, `tuple[X, ...]`, `Annotated[X, …]`)."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _field_at(root: type[BaseModel], loc: Loc) -> FieldInfo | None:
    model = _model_at(root, loc[:-1])
    if model is None or not loc or isinstance(loc[-1], int):
        return None
    return next(
        (f for name, f in model.model_fields.items() if loc[-1] in (name, f.alias)),
        None,
    )


def _model_at(root: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    annotation: Any = root
    for step in loc:
        if isinstance(step, int):
            continue  # an item of a tuple: the tuple's annotation names the item's model
        model = _model_in(annotation)
        found = (
            next((f for name, f in model.model_fields.items() if step in (name, f.alias)), None)
            if model is not None
            else None
        )
        if found is None:
            return None
        annotation = found.annotation
    return _model_in(annotation)


def _keys(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _limits(info: FieldInfo | None) -> tuple[Any, Any]:
    low: Any = "?"
    high: Any = "?"
    for constraint in _constraints(info):
        if isinstance(constraint, annotated_types.Ge):
            low = constraint.ge
        elif isinstance(constraint, annotated_types.Le):
            high = constraint.le
    return low, high


def _constraints(info: FieldInfo | None) -> list[Any]:
    if info is None:
        return []
    found = list(info.metadata)
    for argument in get_args(info.annotation):  # `Annotated[int, Field(ge=..)] | None`
        found += [c for a in get_args(argument)[1:] for c in getattr(a, "metadata", [a])]
    return found


__all__ = [
    "ConfigModel",
    "EnvName",
    "HttpUrl",
    "NonEmpty",
    "ParseContext",
    "Text",
    "choice",
    "choose",
    "context_of",
    "expected_string",
    "none_as_empty",
    "problem",
    "problems",
    "to_config_errors",
    "yaml_path",
]
