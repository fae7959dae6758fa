"""The benchmark's record: a realistic 1 KiB JSON click/purchase event, and its schema on both sides.

Ten top-level fields (ids, strings, a double, two timestamps, a nested `device` struct and a free-text
`properties` field that pads the JSON to about 1,024 bytes). The padding is a slice of a random word
corpus at a random offset: every value is distinct and compresses like text, so neither side profits
from dictionary encoding of repeated values. `seq` is unique per record and `sent_at` is the producer's
clock when it handed the record to the Kafka client (freshness is measured against it).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random
from typing import Any

RECORD_BYTES = 1024

# floe.yaml `schema.fields` of the benchmark's tables (ids as a user would write them).
FLOE_FIELDS: list[dict[str, Any]] = [
    {"name": "seq", "id": 1, "type": "long"},
    {"name": "event_id", "id": 2, "type": "string"},
    {"name": "user_id", "id": 3, "type": "long"},
    {"name": "session_id", "id": 4, "type": "string", "optional": True},
    {"name": "event_type", "id": 5, "type": "string"},
    {"name": "occurred_at", "id": 6, "type": "timestamptz"},
    {"name": "sent_at", "id": 7, "type": "timestamptz"},
    {"name": "amount", "id": 8, "type": "double", "optional": True},
    {"name": "currency", "id": 9, "type": "string", "optional": True},
    {
        "name": "device",
        "id": 10,
        "type": "struct",
        "optional": True,
        "fields": [
            {"name": "os", "id": 11, "type": "string"},
            {"name": "browser", "id": 12, "type": "string", "optional": True},
            {"name": "version", "id": 13, "type": "int", "optional": True},
        ],
    },
    {"name": "properties", "id": 14, "type": "string", "optional": True},
]

# The same record as Spark SQL DDL: the plain job's `from_json` schema and its table's columns.
SPARK_DDL = (
    "seq BIGINT, event_id STRING, user_id BIGINT, session_id STRING, event_type STRING, "
    "occurred_at TIMESTAMP, sent_at TIMESTAMP, amount DOUBLE, currency STRING, "
    "device STRUCT<os: STRING, browser: STRING, version: INT>, properties STRING"
)

_EVENT_TYPES = ("page_view", "click", "add_to_cart", "purchase", "search", "login", "logout", "share")
_OSES = ("android", "ios", "linux", "macos", "windows")
_BROWSERS = ("chrome", "firefox", "safari", "edge", "app")
_CURRENCIES = ("EUR", "USD", "GBP", "JPY", "CHF")
_WORDS_IN_VOCABULARY = 2000
_CORPUS_CHARACTERS = 4_000_000


class _Timestamps:
    """ISO 8601 with microseconds and `Z`, as most JSON producers write timestamps (the formatted
    second is cached: formatting dominates the producer's CPU otherwise)."""

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def format(self, epoch_seconds: float) -> str:
        second = int(epoch_seconds)
        if second != self._second:
            self._second = second
            self._prefix = dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._prefix}.{int((epoch_seconds - second) * 1e6):06d}Z"


class EventFactory:
    """Makes the JSON value of record `seq` (about `RECORD_BYTES` bytes) and its Kafka key."""

    def __init__(self, seed: int = 7, size: int = RECORD_BYTES) -> None:
        rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        vocabulary = [
            "".join(rng.choice(letters) for _ in range(rng.randint(2, 10)))
            for _ in range(_WORDS_IN_VOCABULARY)
        ]
        words: list[str] = []
        length = 0
        while length < _CORPUS_CHARACTERS:
            word = rng.choice(vocabulary)
            words.append(word)
            length += len(word) + 1
        self._corpus = " ".join(words)
        self._rng = rng
        self.size = size
        self._occurred, self._sent = _Timestamps(), _Timestamps()
        # The JSON around `properties`, measured once: padding fills the rest up to `size`.
        self._overhead = len(self._encode(0, 0.0, "")) - 2

    def _encode(self, seq: int, sent_at: float, properties: str) -> bytes:
        # An f-string, not json.dumps: every string here is plain ASCII without quotes or escapes, and
        # the producer must make 1 KiB records much faster than the ingesters read them.
        rng = self._rng
        user = rng.randrange(1, 5_000_000)
        occurred = sent_at - rng.random()
        return (
            f'{{"seq":{seq},"event_id":"{rng.getrandbits(128):032x}","user_id":{user},'
            f'"session_id":"s-{user:x}-{rng.getrandbits(32):08x}",'
            f'"event_type":"{_EVENT_TYPES[seq % len(_EVENT_TYPES)]}",'
            f'"occurred_at":"{self._occurred.format(occurred)}","sent_at":"{self._sent.format(sent_at)}",'
            f'"amount":{rng.randrange(0, 50_000) / 100},"currency":"{_CURRENCIES[seq % len(_CURRENCIES)]}",'
            f'"device":{{"os":"{_OSES[user % len(_OSES)]}","browser":"{_BROWSERS[user % len(_BROWSERS)]}",'
            f'"version":{user % 40}}},"properties":"{properties}"}}'
        ).encode()

    def value(self, seq: int, sent_at: float) -> bytes:
        """The record's JSON value, padded by `properties` to about `size` bytes (±10 for number widths)."""
        wanted = max(0, self.size - self._overhead - len(str(seq)))
        start = self._rng.randrange(0, len(self._corpus) - wanted - 1)
        return self._encode(seq, sent_at, self._corpus[start : start + wanted])

    @staticmethod
    def key(seq: int) -> bytes:
        return str(seq).encode()


# -- the same logical records as Avro and Protobuf --------------------------------------------------

JSON, AVRO, PROTOBUF = "json", "avro", "protobuf"
FORMATS = (JSON, AVRO, PROTOBUF)

# Raw framing for both (plain Avro binary, plain protobuf messages): the JSON values carry no schema-id
# prefix either, so all three topics hold just the encoded record.
PROTO_MESSAGE = "bench.Event"
PROTO = """
syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";

message Device {
  string os = 1;
  optional string browser = 2;
  optional int32 version = 3;
}
message Event {
  int64 seq = 1;
  string event_id = 2;
  int64 user_id = 3;
  optional string session_id = 4;
  string event_type = 5;
  google.protobuf.Timestamp occurred_at = 6;
  google.protobuf.Timestamp sent_at = 7;
  optional double amount = 8;
  optional string currency = 9;
  Device device = 10;
  optional string properties = 11;
}
"""

_AVRO_PRIMITIVES = {
    "long": "long",
    "int": "int",
    "string": "string",
    "double": "double",
    "timestamptz": {"type": "long", "logicalType": "timestamp-micros"},
}
_TIMESTAMP_FIELDS = ("occurred_at", "sent_at")


def _avro_field(field: dict[str, Any]) -> dict[str, Any]:
    kind: Any
    if field["type"] == "struct":
        kind = {
            "type": "record",
            "name": f"r{field['id']}",
            "fields": [_avro_field(f) for f in field["fields"]],
        }
    else:
        kind = _AVRO_PRIMITIVES[field["type"]]
    if field.get("optional"):
        return {"name": field["name"], "type": ["null", kind], "default": None}
    return {"name": field["name"], "type": kind}


# The writer schema floe derives from `FLOE_FIELDS` for an inline Avro table (optional → ["null", T],
# timestamptz → timestamp-micros); Avro binary carries no names, so only the shape has to match.
AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "event",
    "fields": [_avro_field(f) for f in FLOE_FIELDS],
}

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _micros(iso: str) -> int:
    return (dt.datetime.fromisoformat(iso) - _EPOCH) // dt.timedelta(microseconds=1)


class Reencoder:
    """Turns the JSON value of `EventFactory` into the same record as raw Avro or raw Protobuf: the
    value is parsed and every field carried over, so all three topics hold the same logical records."""

    def __init__(self, target: str) -> None:
        self.target = target
        if target == AVRO:
            import fastavro

            self._avro = fastavro.parse_schema(AVRO_SCHEMA)
        elif target == PROTOBUF:
            from google.protobuf import message_factory

            from catalog.pipelines.protobuf import build_pool, descriptor_set

            files, _ = descriptor_set(PROTO, {})
            pool = build_pool(files)
            self._event = message_factory.GetMessageClass(pool.FindMessageTypeByName(PROTO_MESSAGE))

    def encode(self, json_value: bytes) -> bytes:
        if self.target == JSON:
            return json_value
        record = json.loads(json_value)
        if self.target == AVRO:
            import fastavro

            for name in _TIMESTAMP_FIELDS:
                record[name] = _micros(record[name])
            out = io.BytesIO()
            fastavro.schemaless_writer(out, self._avro, record)
            return out.getvalue()
        stamps = {name: _micros(record.pop(name)) for name in _TIMESTAMP_FIELDS}
        message = self._event(**record)
        for name, micros in stamps.items():
            stamp = getattr(message, name)
            stamp.seconds, rest = divmod(micros, 1_000_000)
            stamp.nanos = rest * 1000
        return bytes(message.SerializeToString())
