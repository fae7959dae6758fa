"""Debezium's change events as its PostgreSQL connector writes them through Kafka Connect's JsonConverter.

With `value.converter.schemas.enable=true` (the converter's default) every key and value is
`{"schema": …, "payload": …}`: the Connect schema of the struct, then the struct as JSON; with `false`
only the payload is written. The schemas here are the Connect form of `tests.e2e.debezium_avro`'s
(the same Debezium 2.7 PostgreSQL envelope: `before`/`after` rows, the `io.debezium.connector.postgresql
.Source` block with its `snapshot` enum, the `event.block` transaction struct, `op`, `ts_ms`/`ts_us`/
`ts_ns`), and the payload is the same event. Jackson writes them compactly, nulls included.
"""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.debezium_avro import SERVER_TABLE, event

_ROW: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": False, "field": "first_name"},
        {"type": "string", "optional": False, "field": "last_name"},
        {"type": "string", "optional": True, "field": "email"},
    ],
    "optional": True,
    "name": f"{SERVER_TABLE}.Value",
}

_SOURCE: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "version"},
        {"type": "string", "optional": False, "field": "connector"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": "true,last,false,incremental"},
            "default": "false",
            "field": "snapshot",
        },
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": True, "field": "sequence"},
        {"type": "int64", "optional": True, "field": "ts_us"},
        {"type": "int64", "optional": True, "field": "ts_ns"},
        {"type": "string", "optional": False, "field": "schema"},
        {"type": "string", "optional": False, "field": "table"},
        {"type": "int64", "optional": True, "field": "txId"},
        {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "int64", "optional": True, "field": "xmin"},
    ],
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "field": "source",
}

ENVELOPE: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {**_ROW, "field": "before"},
        {**_ROW, "field": "after"},
        _SOURCE,
        {
            "type": "struct",
            "fields": [
                {"type": "string", "optional": False, "field": "id"},
                {"type": "int64", "optional": False, "field": "total_order"},
                {"type": "int64", "optional": False, "field": "data_collection_order"},
            ],
            "optional": True,
            "name": "event.block",
            "version": 1,
            "field": "transaction",
        },
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
        {"type": "int64", "optional": True, "field": "ts_us"},
        {"type": "int64", "optional": True, "field": "ts_ns"},
    ],
    "optional": False,
    "name": f"{SERVER_TABLE}.Envelope",
    "version": 2,
}

KEY: dict[str, Any] = {
    "type": "struct",
    "fields": [{"type": "int32", "optional": False, "field": "id"}],
    "optional": False,
    "name": f"{SERVER_TABLE}.Key",
}


def _converted(schema: dict[str, Any], payload: dict[str, Any], schemas_enable: bool) -> bytes:
    document = {"schema": schema, "payload": payload} if schemas_enable else payload
    return json.dumps(document, separators=(",", ":")).encode()


def json_key(row_id: int, *, schemas_enable: bool) -> bytes:
    """The record key: the row's primary key struct."""
    return _converted(KEY, {"id": row_id}, schemas_enable)


def json_event(
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    lsn: int,
    *,
    schemas_enable: bool,
) -> bytes:
    """The record value of one change event."""
    return _converted(ENVELOPE, event(op, before, after, lsn), schemas_enable)
