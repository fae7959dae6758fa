"""floe's JSON UDFs in a Spark session: the JVM JSON decoder (ingest/jvm JsonDecoder) and the
undeclared-keys scan (JsonUndeclaredKeys), each registered once per session, with Spark's own
expressions when the JVM code cannot be built."""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING

from pyiceberg.types import NestedField

from ingest.decode import _CORRUPT, _UNDECLARED, _spark_field

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    from pyspark.sql import types as st

log = logging.getLogger(__name__)


def json_decoder(spark: SparkSession, fields: list[NestedField]) -> str | None:
    """The name of floe's JSON decoder function for `fields` (a Catalyst expression called like a UDF:
    jvm/floe/ingest/DecodeValue.java), registered in `spark` once (None when the JVM
    decoder cannot be built or does not read these types)."""
    from pyspark.sql import types as st

    from ingest.jvm_decoder import DecoderBuildError, register_json_decoder

    result = st.StructType(
        [_spark_field(f) for f in fields]
        + [
            st.StructField(_CORRUPT, st.StringType(), True),
            st.StructField(_UNDECLARED, st.ArrayType(st.StringType(), True), True),
        ]
    )
    result_json = nullable(result).json()
    name = "floe_json_decode_" + hashlib.sha256(result_json.encode()).hexdigest()[:16]
    if name in _REFUSED:
        return None
    registered = registered_udfs(spark)
    if name in registered:
        return name
    try:
        register_json_decoder(spark, name, result_json)
    except DecoderBuildError as exc:
        # Said once: the same types (or the missing compiler) refuse it again on every later batch.
        _REFUSED.add(name)
        log.info("JSON through Spark's from_json: %s", exc)
        return None
    registered.add(name)
    return name


def nullable(kind: st.DataType) -> st.DataType:
    """`kind` with every field, element and map value nullable (a decoder's result: required fields
    are checked after decoding, so a missing one is a dead letter, not a failed task)."""
    from pyspark.sql import types as st

    if isinstance(kind, st.StructType):
        return st.StructType([st.StructField(f.name, nullable(f.dataType), True) for f in kind.fields])
    if isinstance(kind, st.ArrayType):
        return st.ArrayType(nullable(kind.elementType), True)
    if isinstance(kind, st.MapType):
        return st.MapType(kind.keyType, nullable(kind.valueType), True)
    return kind


def undeclared_keys(spark: SparkSession, value: Column, fields: list[NestedField]) -> Column:
    """The top-level keys of the JSON object in `value` (UTF-8 bytes) that are not among `fields` (NULL
    when it is not one).

    floe's JVM scan (ingest/jvm JsonUndeclaredKeys) reads the value's bytes once, comparing keys as bytes;
    Spark's `json_object_keys` parsed each value a second time (13% of the executors' time on 1 KiB JSON).
    Without a JDK compiler, Spark's expression."""
    from pyspark.sql import functions as F

    from ingest.jvm_decoder import DecoderBuildError, register_json_undeclared_keys

    names = [f.name for f in fields]
    udf_name = "floe_json_undeclared_" + hashlib.sha256("\0".join(names).encode()).hexdigest()[:16]
    registered = registered_udfs(spark)
    try:
        if udf_name not in registered:
            register_json_undeclared_keys(spark, udf_name, names)
            registered.add(udf_name)
        return F.call_udf(udf_name, value)
    except DecoderBuildError:
        declared = F.array(*[F.lit(n) for n in names]) if names else F.array().cast("array<string>")
        return F.array_except(F.json_object_keys(value.cast("string")), declared)


# floe's UDFs registered per Spark session (application id and session): the JSON decoder and the
# undeclared-keys scan, once per table and schema. A streaming query runs its batches in a session of
# its own, so each query registers them again.
_REGISTERED: dict[str, set[str]] = {}
# JSON decoders the JVM refused (types it does not read, or no JDK compiler): not tried again.
_REFUSED: set[str] = set()


def registered_udfs(spark: SparkSession) -> set[str]:
    """The names of floe's UDFs registered in `spark`'s session so far (add to it on registering)."""
    session = spark._jsparkSession
    return _REGISTERED.setdefault(f"{session.sparkContext().applicationId()}:{session.hashCode()}", set())
