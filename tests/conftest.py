"""Shared fixtures: a real PostgreSQL, real `floe serve` processes on SQLite and on PostgreSQL, and clients.

Every test that touches the database runs once per backend through the `catalog_server` fixture.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

pytest_plugins = ["tests.kafka_fixtures", "tests.registry_fixtures"]

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    with LocalPostgres() as pg:
        yield pg


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def database_url(backend: str, postgres: LocalPostgres, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh, empty database of the backend under test."""
    if backend == "postgres":
        return postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")
    return f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('sqlite') / 'floe.db'}"


@pytest.fixture
def fresh_database_url(backend: str, postgres: LocalPostgres, tmp_path: Path) -> str:
    """An empty database of the backend under test, for a test that starts its own server."""
    if backend == "postgres":
        return postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")
    return f"sqlite+aiosqlite:///{tmp_path / 'floe.db'}"


@pytest.fixture(scope="session")
def catalog_server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogProcess]:
    """One `floe serve` per backend for the session; tests isolate themselves by namespace."""
    home = Path(tmp_path_factory.mktemp("floe-home"))
    with CatalogProcess(database_url, home=home) as server:
        yield server


@pytest.fixture
def http(catalog_server: CatalogProcess, admin_token: str) -> Iterator[httpx.Client]:
    """A raw HTTP client authenticated as the bootstrap admin."""
    headers = {"Authorization": f"Bearer {admin_token}"}
    with httpx.Client(base_url=catalog_server.url, timeout=30, headers=headers) as client:
        yield client


@pytest.fixture(scope="session")
def admin_token(catalog_server: CatalogProcess) -> str:
    return catalog_server.token()


@pytest.fixture
def rest_catalog(catalog_server: CatalogProcess) -> RestCatalog:
    """pyiceberg authenticated with the bootstrap admin key (client credentials)."""
    return catalog_server.catalog()


@pytest.fixture
def namespace(rest_catalog: RestCatalog) -> str:
    """A fresh namespace for one test."""
    name = f"ns_{uuid.uuid4().hex[:10]}"
    rest_catalog.create_namespace(name)
    return name
