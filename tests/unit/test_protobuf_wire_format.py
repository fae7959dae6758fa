"""The Python reader and writer of Confluent's protobuf framing (benchmarks/protobuf_decode/wire_format):
the replaced Python decoder the benchmark measures reads it, tests and benchmarks produce values with it.
floe's own reader is the JVM decoder's (its reasons: tests/e2e/test_protobuf_decoder.py)."""

from __future__ import annotations

import pytest

from benchmarks.protobuf_decode.wire_format import (
    encode_message_indexes,
    read_message_indexes,
    split_confluent,
)


@pytest.mark.parametrize(
    ("indexes", "encoded"),
    [([0], b"\x00"), ([1], b"\x02\x02"), ([0, 2], b"\x04\x00\x04"), ([70], b"\x02\x8c\x01")],
)
def test_message_indexes_are_zigzag_varints_and_zero_alone_means_the_first(
    indexes: list[int], encoded: bytes
) -> None:
    assert encode_message_indexes(indexes) == encoded
    assert read_message_indexes(encoded + b"rest", 0) == (indexes, len(encoded))


def test_split_confluent_gives_schema_id_indexes_and_where_the_message_starts() -> None:
    assert split_confluent(b"\x00\x00\x00\x01\x07\x00payload") == (263, [0], 6)
    assert split_confluent(b"\x00\x00\x00\x00\x05\x04\x02\x00msg") == (5, [1, 0], 8)
