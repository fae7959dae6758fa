"""The catalog's persistence: one interface (`CatalogStore`), with a SQL adapter for PostgreSQL and SQLite."""

from catalog.store.records import (
    NamespaceRecord,
    PendingCommit,
    TabularKind,
    TabularRecord,
    WarehouseRecord,
)
from catalog.store.sql import SqlCatalogStore, create_store

__all__ = [
    "NamespaceRecord",
    "PendingCommit",
    "SqlCatalogStore",
    "TabularKind",
    "TabularRecord",
    "WarehouseRecord",
    "create_store",
]
