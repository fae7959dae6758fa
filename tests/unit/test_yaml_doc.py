"""The floe.yaml reference (docs/reference/floe-yaml.md) is the one generated from the configuration models
(issue 33: every key and every field type, and it cannot drift)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

from catalog.pipelines.schema_fields import TYPE_NAMES
from catalog.pipelines.validation import ConfigModel
from floe.cli import yaml_doc
from floe.cli.yaml_doc import DocError, blocks, render, render_block, with_reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "floe-yaml.md"


def test_the_reference_holds_the_generated_tables() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert page == with_reference(page, render()), (
        "run `python -m floe.cli.yaml_doc --write docs/reference/floe-yaml.md`"
    )


def test_every_key_and_every_field_type_is_listed() -> None:
    reference = render()
    for model in blocks():
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in reference, (model.__name__, name)
    for type_name in TYPE_NAMES:
        assert f"| `{type_name}` |" in reference, type_name
    for key in ("source_clusters", "tables", "key_fields", "envelope", "protobuf_framing", "catalog_id"):
        assert f"`{key}`" in reference


def test_a_key_without_a_meaning_fails_the_render(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broker(ConfigModel):
        hostname: str
        port: int = Field(ge=1, le=65535)
        rack: str | None = None  # a new key nobody documented

    with pytest.raises(DocError, match=r"keys without a meaning \['rack'\]"):
        render_block(Broker)
    meanings = {**yaml_doc.MEANINGS, "Gone": {"x": "a block floe.yaml no longer has"}}
    monkeypatch.setattr(yaml_doc, "MEANINGS", meanings)
    with pytest.raises(DocError, match="no longer has"):
        render()


def test_types_limits_and_defaults_come_from_the_models() -> None:
    reference = render()
    assert "| `port` | whole number (1 to 65,535) | required |" in reference
    assert "| `schema_mode` | `inline` \\| `registry` | `inline` |" in reference
    assert "| `orphan_file_age` | duration (1h to 3650d) |" in reference
    assert "| `interval` | 10m | 1m | duration |" in reference
