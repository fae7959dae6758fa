"""A table's partitioning in floe.yaml: WarpStream's schemes (`unpartitioned`, `hour`, `day` of the Kafka
timestamp) or a list of Iceberg transforms (`hour(event_time)`, `bucket(16, user_id)` …), each checked
against the table's schema (plus floe's `_kafka` fields and, on upsert tables keyed by the record key,
`_key`: `bucket(16, _key)`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import IcebergType

from catalog.pipelines.columns import KAFKA_COLUMN, KAFKA_STRUCT, KAFKA_TIMESTAMP_PATH, KEY_COLUMN, KEY_FIELD
from catalog.pipelines.schema_fields import NESTED_TYPES, FieldConfig
from catalog.pipelines.validation import Loc, problem, problems
from catalog.pipelines.yaml_values import describe_value

TRANSFORMS = ("identity", "year", "month", "day", "hour", "bucket", "truncate")
SCHEMES = ("unpartitioned", "hour", "day")
_TRANSFORM = re.compile(r"^\s*([A-Za-z_]+)\s*\(\s*(?:(-?\d+)\s*,\s*)?([^(),]+?)\s*\)\s*$")
# The halves of `bucket(16, id)` written unquoted in a YAML flow list (`[bucket(16, id)]`), which YAML
# splits at the comma into 'bucket(16' and 'id)'.
_OPENED = re.compile(r"^\s*[A-Za-z_]+\s*\([^()]*$")
_CLOSED = re.compile(r"^[^()]*\)\s*$")
_EXAMPLES = "hour(event_time), day(x), month(x), year(x), bucket(16, user_id), truncate(4, name), identity(x)"


@dataclass(frozen=True)
class PartitionFieldConfig:
    """One partition transform: `hour(event_time)`, `bucket(16, user_id)`, `identity(service)` …"""

    transform: str
    source: str
    argument: int | None = None

    def __str__(self) -> str:
        if self.argument is not None:
            return f"{self.transform}({self.argument}, {self.source})"
        return f"{self.transform}({self.source})"

    def iceberg_transform(self) -> Transform[Any, Any]:
        if self.transform == "bucket":
            assert self.argument is not None
            return BucketTransform(self.argument)
        if self.transform == "truncate":
            assert self.argument is not None
            return TruncateTransform(self.argument)
        return _SIMPLE_TRANSFORMS[self.transform]

    @property
    def name(self) -> str:
        """The partition field's name, as Java's PartitionSpec.Builder names it (dots become `_`)."""
        base = self.source.replace(".", "_")
        suffix = {"identity": "", "bucket": "_bucket", "truncate": "_trunc"}.get(
            self.transform, f"_{self.transform}"
        )
        return base + suffix


_SIMPLE_TRANSFORMS: dict[str, Transform[Any, Any]] = {
    "identity": IdentityTransform(),
    "year": YearTransform(),
    "month": MonthTransform(),
    "day": DayTransform(),
    "hour": HourTransform(),
}
_TIME_TRANSFORMS = frozenset({"year", "month", "day", "hour"})
_TRANSFORM_TYPES = {
    "identity": "a primitive column",
    "year": "a date, timestamp or timestamptz column",
    "month": "a date, timestamp or timestamptz column",
    "day": "a date, timestamp or timestamptz column",
    "hour": "a timestamp or timestamptz column",
    "bucket": (
        "an int, long, decimal, date, time, timestamp, timestamptz, string, uuid, fixed or binary column"
    ),
    "truncate": "an int, long, decimal, string or binary column",
}


def partition_fields(scheme: str | tuple[str, ...]) -> tuple[PartitionFieldConfig, ...]:
    """The transforms of a (validated) `partitioning_scheme`."""
    if isinstance(scheme, str):
        return () if scheme == "unpartitioned" else (PartitionFieldConfig(scheme, KAFKA_TIMESTAMP_PATH),)
    parsed = (parse_transform(item) for item in scheme)
    return tuple(p for p in parsed if isinstance(p, PartitionFieldConfig))


def parse_transform(text: str) -> PartitionFieldConfig | str:
    """`bucket(16, id)` as a transform, or what is wrong with it."""
    match = _TRANSFORM.match(text)
    if match is None:
        return f"invalid partition transform {text!r}: expected one of {_EXAMPLES}"
    name, argument, source = match.group(1).lower(), match.group(2), match.group(3).strip()
    if name not in TRANSFORMS:
        return f"unknown partition transform {match.group(1)!r} (expected one of {', '.join(TRANSFORMS)})"
    if name in ("bucket", "truncate"):
        if argument is None:
            return f"{name} needs a width: {name}({16 if name == 'bucket' else 4}, {source})"
        if int(argument) < 1 or int(argument) > 2**31 - 1:
            return f"{name} width must be a positive integer; got {argument}"
        return PartitionFieldConfig(name, source, int(argument))
    if argument is not None:
        return f"{name} takes only a column: {name}({source})"
    return PartitionFieldConfig(name, source)


def check_partitioning(
    raw: Any, fields: tuple[FieldConfig, ...], *, complete: bool = True
) -> str | tuple[str, ...]:
    """A `partitioning_scheme` in its normalized form, or pydantic errors at its items. `complete` is
    False when the schema is invalid: columns `fields` lacks may be the ones that did not parse."""
    if isinstance(raw, str):
        if raw not in SCHEMES:
            hint = " (a list of transforms, like [hour(event_time)])" if "(" in raw else ""
            raise problem(
                f"expected one of {', '.join(SCHEMES)} or a list of partition transforms{hint}; got {raw!r}"
            )
        return raw
    if not isinstance(raw, list | tuple):
        raise problem(
            f"expected unpartitioned, hour, day or a list of partition transforms; got {describe_value(raw)}"
        )
    found: list[tuple[Loc, str]] = []
    parsed: list[PartitionFieldConfig] = []
    split = _split_transforms(raw)
    for index, item in enumerate(raw):
        if index in split:
            if split[index]:
                found.append(((index,), split[index]))
            continue
        if not isinstance(item, str):
            found.append(
                ((index,), f"expected a transform like hour(event_time); got {describe_value(item)}")
            )
            continue
        transform = parse_transform(item)
        why = transform if isinstance(transform, str) else _source_problem(transform, fields, complete)
        if why is None and isinstance(transform, PartitionFieldConfig):
            why = _clash(transform, parsed, fields)
        if why is not None:
            if why:  # "" : a column the invalid schema may have had
                found.append(((index,), why))
            continue
        assert isinstance(transform, PartitionFieldConfig)
        parsed.append(transform)
    if found:
        raise problems(found)
    return tuple(str(p) for p in parsed) if len(parsed) == len(raw) else tuple(raw)


def _split_transforms(raw: list[Any] | tuple[Any, ...]) -> dict[int, str]:
    """Items that are halves of one transform YAML's flow list split at its comma: the first half's index
    maps to how to quote it, the second's to "" (reported once, with the first)."""
    split: dict[int, str] = {}
    for index in range(len(raw) - 1):
        first, second = raw[index], raw[index + 1]
        if index in split or not (isinstance(first, str) and isinstance(second, str)):
            continue
        if _OPENED.match(first) and _CLOSED.match(second):
            whole = f"{first.strip()}, {second.strip()}"
            split[index] = (
                f"{first!r} and {second!r} are one transform split at its comma by YAML's flow list: "
                f"quote it — [{json.dumps(whole, ensure_ascii=False)}]"
            )
            split[index + 1] = ""
    return split


def _source_problem(
    transform: PartitionFieldConfig, fields: tuple[FieldConfig, ...], complete: bool
) -> str | None:
    found = resolve_column(fields, transform.source)
    if isinstance(found, str):
        return found if complete or not found.startswith("no column") else ""
    if not transform.iceberg_transform().can_transform(found):
        return (
            f"{transform.transform}() needs {_TRANSFORM_TYPES[transform.transform]}; "
            f"{transform.source} is {found}"
        )
    return None


def resolve_column(fields: Sequence[FieldConfig], source: str) -> IcebergType | str:
    """The type of column `source` (dotted through structs, `_kafka.timestamp` included), or why it
    cannot be used as a partition source. `_key` not declared in `fields` is the record key column of an
    upsert table without key_fields (the table's own rules refuse it on any other table)."""
    if source == KAFKA_COLUMN or source.startswith(KAFKA_COLUMN + "."):
        rest = source[len(KAFKA_COLUMN) + 1 :]
        if not rest:
            return f"{KAFKA_COLUMN} is a struct; name one of its fields, like {KAFKA_TIMESTAMP_PATH}"
        for nested in KAFKA_STRUCT.fields:
            if nested.name == rest:
                return nested.field_type
        names = ", ".join(f"{KAFKA_COLUMN}.{f.name}" for f in KAFKA_STRUCT.fields)
        return f"no column {source!r} (the Kafka columns are {names})"
    found = _resolve(fields, source, source)
    if source == KEY_COLUMN and isinstance(found, str) and found.startswith("no column"):
        return KEY_FIELD.field_type
    return found


def _resolve(fields: Sequence[FieldConfig], remaining: str, source: str) -> IcebergType | str:
    for candidate in fields:
        if candidate.name == remaining:
            if candidate.type in NESTED_TYPES:
                return f"{source} is a {candidate.type}; partition by a primitive column"
            return candidate.iceberg_type()
    for candidate in fields:
        if remaining.startswith(candidate.name + "."):
            rest = remaining[len(candidate.name) + 1 :]
            if candidate.type == "struct":
                return _resolve(candidate.fields, rest, source)
            if candidate.type in ("list", "map"):
                return (
                    f"{source} is inside a {candidate.type}; only top-level and struct fields can partition"
                )
    return f"no column {source!r} in the schema"


def _clash(
    transform: PartitionFieldConfig, earlier: list[PartitionFieldConfig], fields: Sequence[FieldConfig]
) -> str | None:
    for other in earlier:
        if other.source == transform.source and other.transform == transform.transform:
            return f"{transform} repeats {other}"
        if (
            other.source == transform.source
            and other.transform in _TIME_TRANSFORMS
            and transform.transform in _TIME_TRANSFORMS
        ):
            return f"{transform} is redundant with {other}: use one time transform per column"
        if other.name == transform.name:
            return f"{transform} and {other} would both be named {transform.name!r}"
    for candidate in fields:
        if candidate.name == transform.name and not (
            transform.transform == "identity" and transform.source == candidate.name
        ):
            return f"the partition field of {transform} would be named {transform.name!r}, like a column"
    return None


__all__ = [
    "SCHEMES",
    "TRANSFORMS",
    "PartitionFieldConfig",
    "check_partitioning",
    "parse_transform",
    "partition_fields",
    "resolve_column",
]
