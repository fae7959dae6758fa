"""The composition root (`catalog/service/components.py`): services get their collaborators by name,
built once and shared, and never the root itself; no service module reaches back for it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from catalog.service.components import CatalogComponents
from catalog.settings import Settings
from catalog.storage import STORAGE_ENDPOINTS
from catalog.store import create_store

SERVICE_DIR = Path(__file__).resolve().parents[2] / "catalog" / "service"


@pytest.fixture
def components(tmp_path: Path) -> CatalogComponents:
    settings = Settings.from_env({"FLOE_HOME": str(tmp_path)})
    # No statement runs: building the services touches no database.
    return CatalogComponents(create_store(f"sqlite+aiosqlite:///{tmp_path / 'floe.db'}"), settings)


def _services(components: CatalogComponents) -> list[object]:
    return [
        *components.tables.values(),
        *components.views.values(),
        components.namespaces,
        components.watermarks,
        components.pipelines,
        components.clusters,
        components.maintenance,
        components.audit_log,
    ]


def test_no_service_holds_the_composition_root(components: CatalogComponents) -> None:
    for service in _services(components):
        for name, value in vars(service).items():
            assert not isinstance(value, CatalogComponents), f"{type(service).__name__}.{name}"


def test_services_share_the_process_wide_collaborators(components: CatalogComponents) -> None:
    assert set(components.tables) == set(STORAGE_ENDPOINTS) == set(components.views)
    for endpoint, tables in components.tables.items():
        assert tables.storage_endpoint == endpoint
        # One cache, one pool, one commit loop, one bus for every service of the process.
        assert tables.load_cache is components.load_cache
        assert tables.table_locations is components.table_locations
        assert tables.listings is components.listings is components.views[endpoint].listings
        assert tables.warehouses is components.warehouses is components.namespaces.warehouses
        assert tables.storage is components.storage is components.views[endpoint].storage
        assert tables.table_commits.commits is components.commits is components.views[endpoint].commits
        assert tables.events is components.events is tables.table_commits.events
        assert tables.vendor is components.vendor
    # `floe apply`'s multi-table commit goes through the table service's commit path.
    assert components.pipelines.tables is components.tables["client"]


def test_no_service_module_imports_the_composition_root() -> None:
    for path in sorted(SERVICE_DIR.rglob("*.py")):
        if path.name == "components.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "catalog.service.components", path
