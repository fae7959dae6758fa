"""pyiceberg 0.12 turns a null list of structs into an empty list, on read and on write: floe keeps it null.

pyiceberg's projection of Arrow data onto an Iceberg schema (`ArrowProjectionVisitor`, which both
`_dataframe_to_data_files` and its scans run every batch through) rebuilds a list whose elements are
structs from the list's offsets alone, dropping its validity bitmap
(https://github.com/apache/iceberg-python/issues/3833, open). What floe writes through it would lose
the difference between "no headers" and "no list" for good: `_kafka.headers` of every record without
headers in a partitioned table the shared consumer writes, and of every record an in-process
compaction rewrites, became `[]` instead of null (found in a 1,000-table run: a compacted file had 919
empty lists and no null), and a user's `list<struct>` column likewise.

`keep_null_lists()` wraps the visitor's `list` so that a list null in the input is null in the
output: the wrapped method's answer, with the input's nulls as its validity (its offsets and values
are kept). Applied by floe's two pyiceberg-internals modules (ingest/shared/pyiceberg_write.py,
maintenance/pyiceberg_rewrite.py) when they are imported. pyiceberg is pinned in pyproject.toml;
tests/unit/test_pyiceberg_nulls.py fails when an upgrade fixes this upstream (remove the wrapper then)
or changes the method wrapped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io import pyarrow as pyiceberg_arrow

_ListMethod = Callable[[Any, Any, pa.Array | None, pa.Array | None], pa.Array | None]
_WRAPPED = "_floe_keeps_null_lists"


def with_nulls_of(source: pa.Array, built: pa.Array) -> pa.Array:
    """`built` (a list array as long as `source`) with `source`'s nulls as its own."""
    if not source.null_count or built.null_count == source.null_count:
        return built
    if not isinstance(built, pa.ListArray | pa.LargeListArray):
        return built
    kind = type(built)
    # Arrow takes a validity mask only with offsets of their own (not a slice of another array's):
    # rebased to start at 0, over the values they span.
    offsets = built.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    rebased = pc.subtract(offsets, pa.scalar(first, offsets.type))
    values = built.values.slice(first, last - first)
    return kind.from_arrays(rebased, values, type=built.type, mask=source.is_null())


def keep_null_lists() -> None:
    """Wrap pyiceberg's projection of lists (once per process; see the module doc)."""
    visitor = pyiceberg_arrow.ArrowProjectionVisitor
    original: _ListMethod = visitor.list
    if getattr(original, _WRAPPED, False):
        return

    def list_keeping_nulls(
        self: Any, list_type: Any, list_array: pa.Array | None, value_array: pa.Array | None
    ) -> pa.Array | None:
        built = original(self, list_type, list_array, value_array)
        if built is None or list_array is None:
            return built
        return with_nulls_of(list_array, built)

    setattr(list_keeping_nulls, _WRAPPED, True)
    list_keeping_nulls.__wrapped__ = original  # type: ignore[attr-defined]  # the contract test's
    visitor.list = list_keeping_nulls  # type: ignore[method-assign]


__all__ = ["keep_null_lists", "with_nulls_of"]
