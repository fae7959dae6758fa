"""Debezium's Avro change events as its PostgreSQL connector writes them through Confluent's AvroConverter.

`ENVELOPE` is the value schema Debezium 2.5+ registers for a table, vendored verbatim in structure: the
`Envelope` record with `before`/`after` as unions of null and the row record `Value`, the
`io.debezium.connector.postgresql.Source` record (the `snapshot` enum with its `connect.*` attributes,
`ts_us`/`ts_ns`, `txId`, `lsn`, `xmin`), the `event.block` transaction record, `op` and the
`ts_ms`/`ts_us`/`ts_ns` unions. Source: the schema a Debezium PostgreSQL connector registered, as captured in
hamba/avro's avro_test.go (TestConcurrentParse, topic `changefeed.pg.testtenant_teststore_abc_kv.public.kvs`);
only the names of the topic and the row record's fields are this test's table (Debezium names the
records `<server>.<schema>.<table>.Value`/`Envelope` and maps int4 → int, varchar → string, a nullable
column → a union with null defaulting to null). `KEY` is the key schema it registers alongside.
"""

from __future__ import annotations

from typing import Any

SERVER_TABLE = "dbserver1.inventory.customers"

VALUE: dict[str, Any] = {
    "type": "record",
    "name": "Value",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "first_name", "type": "string"},
        {"name": "last_name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
    ],
    "connect.name": f"{SERVER_TABLE}.Value",
}

SOURCE: dict[str, Any] = {
    "type": "record",
    "name": "Source",
    "namespace": "io.debezium.connector.postgresql",
    "fields": [
        {"name": "version", "type": "string"},
        {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {
            "name": "snapshot",
            "type": [
                {
                    "type": "string",
                    "connect.version": 1,
                    "connect.parameters": {"allowed": "true,last,false,incremental"},
                    "connect.default": "false",
                    "connect.name": "io.debezium.data.Enum",
                },
                "null",
            ],
            "default": "false",
        },
        {"name": "db", "type": "string"},
        {"name": "sequence", "type": ["null", "string"], "default": None},
        {"name": "ts_us", "type": ["null", "long"], "default": None},
        {"name": "ts_ns", "type": ["null", "long"], "default": None},
        {"name": "schema", "type": "string"},
        {"name": "table", "type": "string"},
        {"name": "txId", "type": ["null", "long"], "default": None},
        {"name": "lsn", "type": ["null", "long"], "default": None},
        {"name": "xmin", "type": ["null", "long"], "default": None},
    ],
    "connect.name": "io.debezium.connector.postgresql.Source",
}

ENVELOPE: dict[str, Any] = {
    "type": "record",
    "name": "Envelope",
    "namespace": SERVER_TABLE,
    "fields": [
        {"name": "before", "type": ["null", VALUE], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": SOURCE},
        {
            "name": "transaction",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "block",
                    "namespace": "event",
                    "fields": [
                        {"name": "id", "type": "string"},
                        {"name": "total_order", "type": "long"},
                        {"name": "data_collection_order", "type": "long"},
                    ],
                    "connect.version": 1,
                    "connect.name": "event.block",
                },
            ],
            "default": None,
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
        {"name": "ts_us", "type": ["null", "long"], "default": None},
        {"name": "ts_ns", "type": ["null", "long"], "default": None},
    ],
    "connect.version": 2,
    "connect.name": f"{SERVER_TABLE}.Envelope",
}

KEY: dict[str, Any] = {
    "type": "record",
    "name": "Key",
    "namespace": SERVER_TABLE,
    "fields": [{"name": "id", "type": "int"}],
    "connect.name": f"{SERVER_TABLE}.Key",
}


def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int) -> dict[str, Any]:
    """A change event as the connector fills `ENVELOPE` (what AvroSerializer then writes)."""
    ts_ms = 1_700_000_000_000 + lsn
    return {
        "before": before,
        "after": after,
        "source": {
            "version": "2.7.3.Final",
            "connector": "postgresql",
            "name": "dbserver1",
            "ts_ms": ts_ms,
            "snapshot": "true" if op == "r" else "false",
            "db": "inventory",
            "sequence": f'["{lsn - 1}","{lsn}"]',
            "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000,
            "schema": "inventory",
            "table": "customers",
            "txId": 500 + lsn,
            "lsn": lsn,
            "xmin": None,
        },
        "transaction": None,
        "op": op,
        "ts_ms": ts_ms + 500,
        "ts_us": (ts_ms + 500) * 1000,
        "ts_ns": (ts_ms + 500) * 1_000_000,
    }
