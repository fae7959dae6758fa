"""Which registry schemas are Debezium Avro envelopes, and what their rows and source blocks hold."""

from __future__ import annotations

import json

import fastavro

from ingest.debezium import envelope_fields
from tests.e2e.debezium_avro import ENVELOPE, KEY, event


def test_debeziums_envelope_gives_its_row_and_source_fields() -> None:
    parts = envelope_fields(json.dumps(ENVELOPE))
    assert parts is not None
    row, source = parts
    assert row == ["id", "first_name", "last_name", "email"]
    assert source[:4] == ["version", "connector", "name", "ts_ms"]
    assert "lsn" in source


def test_after_only_by_reference_and_not_envelopes() -> None:
    by_reference = {**ENVELOPE, "fields": [f for f in ENVELOPE["fields"] if f["name"] != "before"]}
    by_reference["fields"].insert(0, {"name": "before", "type": ["null", "Value"], "default": None})
    by_reference["fields"][1] = {"name": "after", "type": ["null", ENVELOPE["fields"][0]["type"][1]]}
    assert envelope_fields(json.dumps(by_reference)) is not None  # `Value` defined in after, named in before
    assert envelope_fields(json.dumps(KEY)) is None
    assert envelope_fields('"long"') is None
    assert envelope_fields("{not json") is None


def test_the_vendored_schema_is_valid_avro_and_events_fit_it() -> None:
    parsed = fastavro.parse_schema(ENVELOPE)
    fastavro.validation.validate(
        event("c", None, {"id": 1, "first_name": "a", "last_name": "b", "email": None}, 7), parsed
    )
