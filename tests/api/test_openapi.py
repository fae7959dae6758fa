"""floe's OpenAPI document against the live server: `/v1/config` advertises exactly the operations it
documents, all of them Iceberg REST spec operations. The document itself is checked in
tests/unit/test_openapi.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.unit.test_openapi import floe_document, operations, spec_document


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return spec_document()


@pytest.fixture(scope="module")
def floe() -> dict[str, Any]:
    return floe_document()


# (d) The live server advertises exactly the operations it documents.


def test_config_endpoints_are_the_documented_operations(http: httpx.Client, floe: dict[str, Any]) -> None:
    response = http.get("/v1/config")
    assert response.status_code == 200
    endpoints = response.json()["endpoints"]
    assert len(endpoints) == len(set(endpoints)), "duplicate endpoints"
    # The config route itself is where clients learn the list, so the list covers the catalog routes.
    documented = {op.endpoint for op in operations(floe).values() if op.path.startswith("/v1/{prefix}/")}
    assert set(endpoints) == documented


def test_config_endpoints_are_spec_operations(http: httpx.Client, spec: dict[str, Any]) -> None:
    spec_endpoints = {op.endpoint for op in operations(spec).values()}
    endpoints = http.get("/v1/config").json()["endpoints"]
    assert set(endpoints) <= spec_endpoints, sorted(set(endpoints) - spec_endpoints)
