"""A real Schema Registry (Apicurio, in memory, Confluent-compatible API) for the whole test session.

Registered through `pytest_plugins` in tests/conftest.py. The registry's log lives under pytest's
basetemp, so a failing run can be inspected afterwards. The first run on a machine downloads and builds
the registry (about a minute); later sessions start it in seconds.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ingest.schema_registry import LocalSchemaRegistry


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSchemaRegistry]:
    """A started LocalSchemaRegistry; `schema_registry.url` is its Confluent-compatible base URL."""
    with LocalSchemaRegistry(log_dir=tmp_path_factory.mktemp("schema-registry")) as registry:
        yield registry
