"""How deep a schema's types nest, counted without recursion (issue 29: deep nesting must be a 400, never a
RecursionError's 500): the JSON count (before pyiceberg parses) and the parsed count agree, and a metadata
file nested past pyiceberg's recursive parsing is an invalid-metadata 400."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter
from pyiceberg.schema import Schema

from catalog.commit import create_table_metadata, parse_table_metadata
from catalog.errors import BadRequest
from catalog.service.quotas import MAX_SCHEMA_DEPTH, json_schema_depth, schema_depth


def nested(depth: int, kind: str) -> dict[str, Any]:
    inner: Any = "long"
    for level in range(depth):
        if kind == "list":
            inner = {"type": "list", "element-id": 1000 + level, "element": inner, "element-required": False}
        elif kind == "map":
            inner = {
                "type": "map",
                "key-id": 2000 + 2 * level,
                "key": "string",
                "value-id": 2001 + 2 * level,
                "value": inner,
                "value-required": False,
            }
        else:
            inner = {
                "type": "struct",
                "fields": [{"id": 3000 + level, "name": f"f{level}", "required": False, "type": inner}],
            }
    return {"type": "struct", "fields": [{"id": 1, "name": "a", "required": False, "type": inner}]}


@pytest.mark.parametrize("kind", ["list", "map", "struct"])
@pytest.mark.parametrize("depth", [0, 1, 7, MAX_SCHEMA_DEPTH - 1, MAX_SCHEMA_DEPTH])
def test_json_and_parsed_depths_agree(kind: str, depth: int) -> None:
    schema = nested(depth, kind)
    parsed = TypeAdapter(Schema).validate_python(schema)
    assert json_schema_depth(schema, 10_000) == schema_depth(parsed) == depth + 1


def test_the_json_count_stops_early_and_ignores_junk() -> None:
    assert json_schema_depth(nested(5000, "list"), 65) == 65
    assert json_schema_depth({"type": "struct", "fields": "x"}, 10) == 1
    assert json_schema_depth(None, 10) == 0


def test_metadata_nested_past_pyiceberg_is_a_bad_request() -> None:
    flat = {"type": "struct", "fields": [{"id": 1, "name": "a", "required": False, "type": "long"}]}
    text = create_table_metadata(
        schema=flat, location="file:///w/t", partition_spec=None, write_order=None, properties={}
    ).model_dump_json()
    for depth in (150, 400, 5000):
        inner = '"long"'
        for level in range(depth):
            inner = (
                f'{{"type":"list","element-id":{1000 + level},"element":{inner},"element-required":false}}'
            )
        deep = text.replace('"type":"long"', '"type":' + inner, 1)
        with pytest.raises(BadRequest, match="Invalid table metadata"):
            parse_table_metadata(deep)
