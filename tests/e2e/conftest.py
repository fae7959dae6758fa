"""The end-to-end tier's fixtures: real processes for the whole session.

`catalog_server` is a real `floe serve` subprocess per backend; `kafka` a single-node Kafka broker;
`schema_registry` a Schema Registry (Apicurio, in memory, Confluent-compatible API) and
`authenticated_registry` the same registry behind basic authentication. Their data directories and
logs live under pytest's basetemp, so a failing run can be inspected afterwards. The first run on a
machine downloads and builds the registry (about a minute); later sessions start it in seconds.

Every test in this directory carries the `e2e` mark, so `pytest -m "not e2e"` leaves the tier out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devtools.catalog_server import CatalogProcess
from devtools.kafka_broker import LocalKafka
from devtools.postgres import LocalPostgres
from devtools.schema_registry import LocalSchemaRegistry
from tests.e2e.registry_proxy import REGISTRY_PASSWORD, REGISTRY_USER, BasicAuthProxy

_TIER = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(_TIER):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def catalog_server(
    new_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CatalogProcess]:
    """One `floe serve` process per backend for the session; tests isolate themselves by namespace."""
    home = Path(tmp_path_factory.mktemp("floe-home"))
    with CatalogProcess(new_database(), home=home) as server:
        yield server


@pytest.fixture(scope="session")
def two_worker_server(
    postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CatalogProcess]:
    """`floe serve --workers 2` on a PostgreSQL database of its own (several workers need PostgreSQL),
    for the session: the tests that need several worker processes share it, each with its own
    namespaces and keys."""
    database_url = postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")
    home = Path(tmp_path_factory.mktemp("floe-two-workers"))
    with CatalogProcess(database_url, home=home, workers=2) as server:
        yield server


@pytest.fixture(scope="session")
def duckdb_extensions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extension directory DuckDB connections of the session install into (each extension is a
    ~50 MB copy: once is enough)."""
    return Path(tmp_path_factory.mktemp("duckdb-extensions"))


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A started LocalKafka; `kafka.bootstrap_servers` is `127.0.0.1:<port>`."""
    with LocalKafka(data_dir=tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSchemaRegistry]:
    """A started LocalSchemaRegistry; `schema_registry.url` is its Confluent-compatible base URL."""
    with LocalSchemaRegistry(log_dir=tmp_path_factory.mktemp("schema-registry")) as registry:
        yield registry


@pytest.fixture(scope="session")
def authenticated_registry(schema_registry: LocalSchemaRegistry) -> Iterator[BasicAuthProxy]:
    """The session's registry behind basic authentication (REGISTRY_USER, REGISTRY_PASSWORD)."""
    proxy = BasicAuthProxy(schema_registry.base_url, REGISTRY_USER, REGISTRY_PASSWORD)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
