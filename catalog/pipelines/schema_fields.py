"""An inline schema in floe.yaml: its fields (ids kept exactly as written) and their Iceberg types.

Primitive type names are read by pyiceberg's own type parser (`decimal(10, 2)`, `fixed[16]`, `long` …),
limited to the types floe ingests; `struct`, `list` and `map` list their children under `fields`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from catalog.pipelines.columns import INTERNAL_PREFIX, KAFKA_COLUMN, MAX_USER_FIELD_ID
from catalog.pipelines.validation import (
    ConfigModel,
    Loc,
    NonEmpty,
    Text,
    context_of,
    expected_string,
    problem,
    problems,
)
from catalog.pipelines.yaml_values import parent_path

PRIMITIVE_TYPES: dict[str, PrimitiveType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "date": DateType(),
    "time": TimeType(),
    "timestamp": TimestampType(),
    "timestamptz": TimestamptzType(),
    "string": StringType(),
    "uuid": UUIDType(),
    "binary": BinaryType(),
}
NESTED_TYPES = ("struct", "list", "map")
TYPE_NAMES = (*PRIMITIVE_TYPES, "decimal(P,S)", "fixed[N]", *NESTED_TYPES)
# pyiceberg parses more (timestamp_ns, unknown …) than floe's ingestion writes.
_SUPPORTED: tuple[type[PrimitiveType], ...] = (
    *(type(t) for t in PRIMITIVE_TYPES.values()),
    DecimalType,
    FixedType,
)
_AROUND_PUNCTUATION = re.compile(r"\s*([(),\[\]])\s*")
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")
_FIXED = re.compile(r"^fixed\[(\d+)\]$")


def primitive_type(name: str) -> PrimitiveType | None:
    """The Iceberg type a primitive type name stands for (`decimal(10, 2)`, `fixed[16]`, `long` …)."""
    compact = _AROUND_PUNCTUATION.sub(r"\1", name.strip().lower())
    try:
        found = IcebergType.model_validate(compact)
    except ValidationError:
        return None
    # pyiceberg matches a prefix (`decimal(1,0)x`): the whole name must be the type.
    if not isinstance(found, _SUPPORTED) or str(found).replace(" ", "") != compact:
        return None
    assert isinstance(found, PrimitiveType)
    return found


def canonical_type(value: Any) -> str:
    """A type name as floe stores it (`Decimal( 10,2 )` → `decimal(10, 2)`), or a pydantic error."""
    if not isinstance(value, str):
        raise problem(expected_string(value))
    if not value.strip():
        raise problem("must not be empty")
    name = value.strip().lower()
    if name in NESTED_TYPES:
        return name
    compact = _AROUND_PUNCTUATION.sub(r"\1", name)
    decimal = _DECIMAL.match(compact)
    if decimal is not None:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        if not (1 <= precision <= 38 and scale <= precision):
            raise problem(f"invalid {value!r}: decimal(P,S) needs 1 <= P <= 38 and 0 <= S <= P")
    fixed = _FIXED.match(compact)
    if fixed is not None and int(fixed.group(1)) < 1:
        raise problem(f"invalid {value!r}: fixed[N] needs N >= 1")
    found = primitive_type(compact)
    if found is None:
        hint = difflib.get_close_matches(name, [*PRIMITIVE_TYPES, *NESTED_TYPES], n=1)
        suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
        raise problem(f"unknown type {value!r} (expected one of {', '.join(TYPE_NAMES)}){suggestion}")
    return str(found)


TypeName = Annotated[str, BeforeValidator(canonical_type)]
INT32 = (-(2**31), 2**31 - 1)


class FieldConfig(ConfigModel):
    """One field of an inline schema; `type` is canonical (`decimal(10, 2)`, `fixed[16]`, `struct` …).

    A struct lists its fields, a list its `element`, a map its `key` and `value` (in that order)."""

    name: Text
    id: int
    type: TypeName
    optional: bool = False
    doc: str | None = None
    fields: tuple[FieldConfig, ...] = Field(default=(), strict=False, exclude_if=lambda fields: not fields)

    @property
    def required(self) -> bool:
        return not self.optional

    def iceberg_type(self) -> IcebergType:
        """This field's type as a pyiceberg type, nested types included."""
        if self.type == "struct":
            return StructType(*(f.nested_field() for f in self.fields))
        if self.type == "list":
            (element,) = self.fields
            return ListType(element.id, element.iceberg_type(), element_required=element.required)
        if self.type == "map":
            key, value = self.fields
            return MapType(
                key.id, key.iceberg_type(), value.id, value.iceberg_type(), value_required=value.required
            )
        found = primitive_type(self.type)
        assert found is not None, self.type
        return found

    def nested_field(self) -> NestedField:
        return NestedField(self.id, self.name, self.iceberg_type(), required=self.required, doc=self.doc)

    def walk(self) -> Iterator[FieldConfig]:
        """This field and every field below it."""
        yield self
        for child in self.fields:
            yield from child.walk()

    @field_validator("name")
    @classmethod
    def _unique_name(cls, name: str, info: ValidationInfo) -> str:
        context = context_of(info)
        if context is None:
            return name
        siblings = parent_path(context.path)
        names = context.field_names.setdefault(siblings, {})
        if name in names:
            raise problem(f"duplicate field name {name!r} (also at {names[name]})")
        names[name] = context.path
        if name == KAFKA_COLUMN and siblings.endswith(".schema.fields"):
            raise problem(f"{KAFKA_COLUMN} is reserved: floe adds it with the Kafka metadata")
        if name.startswith(INTERNAL_PREFIX) and siblings.endswith(".schema.fields"):
            raise problem(f"names starting with {INTERNAL_PREFIX} are reserved for floe's ingestion")
        return name

    @field_validator("id")
    @classmethod
    def _valid_id(cls, field_id: int, info: ValidationInfo) -> int:
        if not INT32[0] <= field_id <= INT32[1]:
            raise problem(f"must be between {INT32[0]} and {INT32[1]}; got {field_id}")
        if not 1 <= field_id <= MAX_USER_FIELD_ID:
            raise problem(
                f"field ids must be between 1 and {MAX_USER_FIELD_ID} "
                f"(ids from {MAX_USER_FIELD_ID + 1} up are reserved for floe's {KAFKA_COLUMN} column); "
                f"got {field_id}"
            )
        context = context_of(info)
        if context is not None:
            if field_id in context.field_ids:
                raise problem(f"duplicate field id {field_id} (also used at {context.field_ids[field_id]})")
            context.field_ids[field_id] = f"{context.path}.id"
        return field_id

    @model_validator(mode="after")
    def _children(self) -> FieldConfig:
        """A struct, list or map has the children it needs; nothing else has any."""
        found: list[tuple[Loc, str]] = []
        given = "fields" in self.model_fields_set
        if self.type not in NESTED_TYPES:
            if given:
                found.append(
                    (("fields",), f"only struct, list and map have fields; {self.name} is a {self.type}")
                )
        elif not given:
            found.append((("fields",), f"a {self.type} needs fields"))
        elif not self.fields:
            found.append((("fields",), "must not be empty"))
        names = [child.name for child in self.fields]
        if given and self.type == "list" and names != ["element"]:
            found.append(
                (
                    ("fields",),
                    "a list has exactly one field, named element: "
                    "fields: [{name: element, id: .., type: ..}]",
                )
            )
        if given and self.type == "map":
            if sorted(names) != ["key", "value"]:
                found.append((("fields",), "a map has exactly two fields, named key and value"))
            for index, child in enumerate(self.fields):
                if child.name == "key" and child.optional:
                    found.append((("fields", index, "optional"), "map keys cannot be optional"))
        if found:
            raise problems(found)
        if self.type == "map" and names == ["value", "key"]:
            return self.model_copy(update={"fields": self.fields[::-1]})
        return self


class TableSchema(ConfigModel):
    """A table's `schema:` block; field ids are unique across all of it, nested fields included."""

    fields: Annotated[tuple[FieldConfig, ...], NonEmpty] = Field(strict=False)

    @model_validator(mode="before")
    @classmethod
    def _new_ids(cls, data: Any, info: ValidationInfo) -> Any:
        context = context_of(info)
        if context is not None:
            context.field_ids = {}
        return data


__all__ = [
    "NESTED_TYPES",
    "PRIMITIVE_TYPES",
    "TYPE_NAMES",
    "FieldConfig",
    "TableSchema",
    "canonical_type",
    "primitive_type",
]
