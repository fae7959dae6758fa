"""Fixtures every tier shares: the database backends, and clients of the tier's catalog server.

The tests come in three tiers: `tests/unit` (pure functions, no server, no database process),
`tests/api` (the catalog's HTTP API, served in-process) and `tests/e2e` (real processes: Kafka, Spark,
the schema registry, DuckDB, `floe serve` subprocesses, PostgreSQL). `pytest -m "not e2e"` runs the
first two; plain `pytest` runs everything.

Every test that touches the database runs once per backend through the `backend` parameter. The
PostgreSQL parameter carries the `e2e` mark, since it starts a real database process; `catalog_server`
(the tier's catalog, defined in each tier's conftest.py) serves a database of the backend under test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.e2e)]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for `-n auto` (pyproject's addopts): the quick tier (`-m "not e2e"`) spreads over the
    cores, each worker with its own in-process catalog; a run that selects e2e tests stays in one
    process, because Kafka, Spark, Trino and the registry are started once per session and two
    copies of them would only compete for the same cores. `-n N` on the command line overrides it."""
    if config.getoption("markexpr", "").replace(" ", "") != "note2e":
        return 0
    return min(os.cpu_count() or 1, 4)


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """A real PostgreSQL for the session (started only when a test needs it)."""
    with LocalPostgres() as pg:
        yield pg


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def new_database_url(backend: str, request: pytest.FixtureRequest, directory: Path) -> str:
    """A fresh, empty database of `backend`: a PostgreSQL database, or a SQLite file in `directory`."""
    if backend == "postgres":
        postgres: LocalPostgres = request.getfixturevalue("postgres")
        return postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")
    return f"sqlite+aiosqlite:///{directory / 'floe.db'}"


@pytest.fixture(scope="session")
def new_database(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[], str]:
    """Makes fresh, empty databases of the backend under test (for session and module servers)."""
    if backend == "postgres":
        postgres: LocalPostgres = request.getfixturevalue("postgres")
        return lambda: postgres.create_database(f"floe_{uuid.uuid4().hex[:8]}")
    return lambda: f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('sqlite') / 'floe.db'}"


# `database_url` and `admin_token` are per test, not per session: each tier defines its own session
# `catalog_server` (in-process for api, a process for e2e), and a session-cached value would belong to
# whichever tier ran first (the e2e tier then sent the api server's token: "unknown signing key").
@pytest.fixture
def database_url(catalog_server: CatalogProcess) -> str:
    """The database the tier's `catalog_server` serves."""
    assert catalog_server.database_url is not None
    return catalog_server.database_url


@pytest.fixture
def fresh_database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of the backend under test, for a test that starts its own server."""
    return new_database_url(backend, request, tmp_path)


@pytest.fixture
def http(catalog_server: CatalogProcess, admin_token: str) -> Iterator[httpx.Client]:
    """A raw HTTP client authenticated as the bootstrap admin."""
    headers = {"Authorization": f"Bearer {admin_token}"}
    with httpx.Client(base_url=catalog_server.url, timeout=30, headers=headers) as client:
        yield client


@pytest.fixture
def admin_token(catalog_server: CatalogProcess) -> str:
    """A token of the bootstrap admin, from the tier's `catalog_server`."""
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
