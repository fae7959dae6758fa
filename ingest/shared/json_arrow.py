"""A batch of JSON values as Arrow columns in one call of Arrow's C++ JSON reader: the shared consumer's
fast path (`ingest.shared.json_rows` decodes a value at a time in Python, ~70 µs a record).

Arrow's reader is stricter than Spark's (a string field given a number, a float given "NaN", a
timestamp given epoch seconds: it refuses the whole batch), so it only ever answers "every record is
a good row, and here they are": the batch then needs nothing else. Whenever it refuses, or a record
could be read differently by the two (a value spanning lines, two objects in one value, a required
field null, an undeclared field inside a struct), None sends the batch to the per-record decoder,
which finds the dead letters and their reasons. Only types both read alike are taken: boolean, int,
long, float, double, string, timestamptz, and structs and lists of them (no required field inside a
struct or list, whose check is the per-record decoder's).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from ingest.decode import user_fields

_PLAIN = (BooleanType, IntegerType, LongType, FloatType, DoubleType, StringType, TimestamptzType)


def arrow_reads(schema: Schema) -> bool:
    """Whether Arrow's reader can take the batches of a table of `schema` (see the module doc)."""

    def ok(kind: IcebergType) -> bool:
        if isinstance(kind, _PLAIN):
            return True
        if isinstance(kind, StructType):
            return all(not f.required and ok(f.field_type) for f in kind.fields)
        if isinstance(kind, ListType):
            return not kind.element_required and ok(kind.element_type)
        return False

    return all(ok(f.field_type) for f in user_fields(schema))


@dataclass
class ArrowBatch:
    """A batch read by Arrow: the user fields' columns (cast to the table's types), in field order."""

    columns: dict[str, pa.Array]
    value_bytes: int = 0  # the values' bytes in all
    records_with_undeclared: int = 0
    undeclared: Counter[str] = field(default_factory=Counter)


class ArrowJson:
    """Reads batches of one table's JSON values with Arrow (`arrow_reads` must hold for its schema)."""

    def __init__(self, schema: Schema, table_schema: pa.Schema) -> None:
        self.fields: list[NestedField] = user_fields(schema)
        self.targets = {f.name: table_schema.field(f.name) for f in self.fields}
        self.explicit = pa.schema([pa.field(n, _without_metadata(t.type)) for n, t in self.targets.items()])
        self.required = [f.name for f in self.fields if f.required]

    def read(self, values: Sequence[bytes | None]) -> ArrowBatch | None:
        """The values' columns, or None when the per-record decoder must look (see the module doc)."""
        if not values or None in values or b"" in values:
            return None
        data = b"\n".join(values)  # type: ignore[arg-type]  # no None: checked above
        # A value with a line break of its own: checked on the joined bytes (in C), not per value.
        if data.count(b"\n") != len(values) - 1 or b"\r" in data:
            return None
        try:
            parsed = pa_json.read_json(
                io.BytesIO(data),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1),
                parse_options=pa_json.ParseOptions(
                    explicit_schema=self.explicit, unexpected_field_behavior="infer"
                ),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        if parsed.num_rows != len(values):
            return None
        if any(parsed.column(name).null_count for name in self.required):
            return None
        columns: dict[str, pa.Array] = {}
        for name, target in self.targets.items():
            column = parsed.column(name).combine_chunks()
            if column.type != self.explicit.field(name).type:
                return None  # an undeclared field inside a struct: the per-record decoder drops it
            try:
                columns[name] = column.cast(target.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                return None
        batch = ArrowBatch(columns, value_bytes=len(data) - (len(values) - 1))
        extra = [n for n in parsed.column_names if n not in self.targets]
        if extra:
            present = [pc.is_valid(parsed.column(n)) for n in extra]
            any_present = present[0]
            for mask in present[1:]:
                any_present = pc.or_(any_present, mask)
            batch.records_with_undeclared = int(pc.sum(any_present).as_py() or 0)
            for name, mask in zip(extra, present, strict=True):
                count = int(pc.sum(mask).as_py() or 0)
                if count:
                    batch.undeclared[name] = count
        return batch


def _without_metadata(kind: pa.DataType) -> pa.DataType:
    """`kind` with the field-id metadata of its nested fields removed (the reader's schema)."""
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _without_metadata(f.type)) for f in kind])
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(_without_metadata(kind.value_type))
    return kind
