"""Confluent's wire format for protobuf in Python: the framing the replaced Python decoder
(`python_decoder`) reads, and the message indexes tests and benchmarks write when producing values.

floe itself does not use this: its JVM decoder reads the framing (`Framing` in
ingest/jvm/floe/ingest/ProtobufDecoder.java) and gives the same reasons as `RecordError` here.
"""

from __future__ import annotations

from collections.abc import Sequence

MAGIC_BYTE = 0


class RecordError(ValueError):
    """Why a value cannot be decoded: its framing, or (in `python_decoder`) its message."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise RecordError("value's message indexes are truncated")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise RecordError("value's message indexes are malformed (varint too long)")


def _zigzag(data: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _varint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_message_indexes(data: bytes, pos: int) -> tuple[list[int], int]:
    """Confluent's message-index array at `pos` (zig-zag varints: a count, then the indexes; a single 0
    is `[0]`, the first message) and where the message starts."""
    count, pos = _zigzag(data, pos)
    if count == 0:
        return [0], pos
    if count < 0 or count > 64:
        raise RecordError(f"value's message indexes are malformed (count {count})")
    indexes = []
    for _ in range(count):
        index, pos = _zigzag(data, pos)
        if index < 0:
            raise RecordError(f"value's message indexes are malformed (index {index})")
        indexes.append(index)
    return indexes, pos


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """The message-index array as Confluent serializers write it."""
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    for number in (len(indexes), *indexes):
        raw = (number << 1) ^ (number >> 63)
        while True:
            byte = raw & 0x7F
            raw >>= 7
            if raw:
                out.append(byte | 0x80)
            else:
                out.append(byte)
                break
    return bytes(out)


def split_confluent(value: bytes) -> tuple[int, list[int], int]:
    """(schema id, message indexes, offset of the message) of a Confluent-framed protobuf value."""
    if len(value) < 6 or value[0] != MAGIC_BYTE:
        raise RecordError("value is not in the Confluent wire format (magic byte 0 + schema id)")
    schema_id = int.from_bytes(value[1:5], "big", signed=True)
    if schema_id < 0:
        raise RecordError("value is not in the Confluent wire format (negative schema id)")
    if value[5] == 0:  # [0], the first message: what nearly every value carries
        return schema_id, [0], 6
    indexes, pos = read_message_indexes(value, 5)
    return schema_id, indexes, pos
