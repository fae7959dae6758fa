"""The catalog's persistence: per-aggregate interfaces (`catalog.store.interfaces`, together
`CatalogStore`), with a SQL adapter for PostgreSQL and SQLite (`SqlCatalogStore`)."""

from catalog.store.interfaces import CatalogStore
from catalog.store.records import (
    DroppedTabular,
    NamespaceRecord,
    PendingCommit,
    TabularKind,
    TabularRecord,
    WarehouseRecord,
)
from catalog.store.sql import SqlCatalogStore, create_store

__all__ = [
    "CatalogStore",
    "DroppedTabular",
    "NamespaceRecord",
    "PendingCommit",
    "SqlCatalogStore",
    "TabularKind",
    "TabularRecord",
    "WarehouseRecord",
    "create_store",
]
