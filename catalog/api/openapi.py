"""floe's OpenAPI document, generated from the Litestar app (committed as `openapi/floe.json`)."""

from __future__ import annotations

import json
from pathlib import Path

from catalog.api.app import build_litestar
from catalog.settings import Settings


def render_openapi() -> str:
    settings = Settings.from_env({"FLOE_HOME": "/nonexistent-floe-home"})
    app = build_litestar(settings)
    schema = app.openapi_schema.to_schema()
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


OPENAPI_PATH = Path(__file__).resolve().parents[2] / "openapi" / "floe.json"
