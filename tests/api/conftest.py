"""The API tier's fixtures: the catalog's HTTP API served in the test process.

`catalog_server` serves the app `floe serve` serves (`catalog.api.app.create_app`) with uvicorn in a
thread of the test process (tests/api/catalog_thread.py), one per backend for the session; clients
such as pyiceberg reach it by URL as they reach a real server. Tests that start their own server do so
with `CatalogThread` too, except where only a real process shows the behaviour (connection limits and
memory in test_server_limits.py; kill -9 and several workers are in tests/e2e).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devtools.catalog_server import CatalogProcess
from tests.api.catalog_thread import CatalogThread


@pytest.fixture(scope="session")
def catalog_server(
    new_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CatalogProcess]:
    """One in-process catalog per backend for the session; tests isolate themselves by namespace."""
    home = Path(tmp_path_factory.mktemp("floe-home"))
    with CatalogThread(new_database(), home=home) as server:
        yield server
