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

import functools
import os
import ssl
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx._transports.default as httpx_transports
import pytest
from httpx._config import create_ssl_context
from pyiceberg.catalog.rest import RestCatalog

from devtools.catalog_server import CatalogProcess
from devtools.postgres import LocalPostgres

# `floe maintain` lowers its CPU priority by default. Here it shares the machine with the other test
# worker, whose load would set its pace, and a test invoking it in-process would lower the test worker
# itself: tests run it at normal priority (tests/unit/test_cpu_priority.py checks the default).
os.environ.setdefault("FLOE_MAINTAIN_NICE", "0")

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.e2e)]


@functools.cache
def _verifying_tls_context(trust_env: bool, cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """httpx's default context for these settings (it reads SSL_CERT_FILE and SSL_CERT_DIR itself)."""
    return create_ssl_context(verify=True, trust_env=trust_env)


def _tls_context_shared_by_clients(
    verify: ssl.SSLContext | str | bool = True, cert: Any = None, trust_env: bool = True
) -> ssl.SSLContext:
    """httpx's `create_ssl_context`, except that its default context (verify=True) is made once per
    process for each SSL_CERT_FILE/SSL_CERT_DIR setting.

    httpx builds a new context for every Client and every `httpx.get`/`httpx.post`, parsing certifi's CA
    bundle each time: about 25 ms of CPU, and the tests make thousands of clients (a token, a health
    check, a fixture's client), nearly all to plain-HTTP loopback servers that never use it. The shared
    context verifies as a new one would (the same CA certificates, hostname checking)."""
    if verify is True and cert is None:
        cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        return _verifying_tls_context(trust_env, cafile if trust_env else None, capath if trust_env else None)
    return create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)


# httpx's transports call the name they imported (HTTPTransport and AsyncHTTPTransport, httpx 0.28).
if vars(httpx_transports).get("create_ssl_context") is create_ssl_context:
    vars(httpx_transports)["create_ssl_context"] = _tls_context_shared_by_clients


def _runs_e2e(config: pytest.Config) -> bool:
    """Whether the run selects e2e tests (`-m "not e2e"` is the quick tier)."""
    return str(config.getoption("markexpr", "")).replace(" ", "") != "note2e"


def _names_directories_only(config: pytest.Config) -> bool:
    """Whether the command line names whole directories (or nothing: the testpaths), as a tier's run
    does, rather than test files or test ids."""
    return all(Path(arg.split("::", 1)[0]).is_dir() for arg in config.args)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for `-n auto` (pyproject's addopts): the quick tier (`-m "not e2e"`) spreads over the
    cores (up to 4), each worker with its own in-process catalog. The e2e tier runs on two workers
    (E2E_WORKERS=N for another number, 1 for one process) a whole module at a time
    (`pytest_xdist_make_scheduler`), each worker with its own Kafka, registry and catalog: on a quiet
    2-core machine that took the tier from 3,587 s to 2,609 s, kill -9 tests included. Checks that
    time something bound its steps, not the whole (test_ingest's backlog test checks the gap between
    two batches, not the backlog's total time), so a machine busy with the other worker slows them
    without failing them. A run naming e2e files or tests stays in one process. `-n N` on the command
    line overrides it."""
    cores = os.cpu_count() or 1
    if not _runs_e2e(config):
        return min(cores, 4)
    if not _names_directories_only(config):
        return 0
    workers = int(os.environ.get("E2E_WORKERS", "2" if cores >= 2 else "1"))
    return workers if workers > 1 else 0


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """A run with e2e tests hands out whole modules (`--dist loadfile`): a module's servers, broker
    topics and `floe ingest` are module fixtures, set up once on one worker. Modules go out in the
    order `pytest_collection_modifyitems` gives (the longest first), so no long module is left
    for the end while the other worker idles."""
    if not _runs_e2e(config):
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    config.option.loadscopereorder = False
    return LoadFileScheduling(config, log)


# The e2e modules that take longest, longest first (the last CI's --durations: test_upsert's 8 tests
# take 61-89 s each, test_containers 224 s, test_ingest's kill -9 112 s, the ingest benchmark 94 s):
# handed out first on the xdist workers. Every other e2e module follows, then the API tier's PostgreSQL
# parameters (many short modules, which fill the end of the run evenly).
_LONGEST_MODULES = (
    "tests/e2e/test_upsert.py",
    "tests/e2e/test_ingest.py",
    "tests/e2e/test_containers.py",
    "tests/e2e/test_benchmark_smoke.py",
)


def _module_rank(item: pytest.Item) -> tuple[int, int]:
    module = item.nodeid.split("::", 1)[0]
    if module in _LONGEST_MODULES:
        return (0, _LONGEST_MODULES.index(module))
    return (1, 0) if module.startswith("tests/e2e/") else (2, 0)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers of a run with e2e tests: the longest modules first (a stable sort: the tests
    of a module keep their order)."""
    if hasattr(config, "workerinput") and _runs_e2e(config):
        items.sort(key=_module_rank)


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
