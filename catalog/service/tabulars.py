"""Namespaces, tables and views as the Iceberg REST spec answers for them: lookups with the spec's 404s,
the one set of names tables and views share, and rename (worded as the Java reference words it)."""

from __future__ import annotations

from catalog.errors import AlreadyExists, NoSuchNamespace, NoSuchTable, NoSuchView
from catalog.identifiers import Namespace, TableIdent
from catalog.store import CatalogStore, NamespaceRecord, TabularKind, TabularRecord, WarehouseRecord


class Tabulars:
    """The catalog objects of a store, looked up and named by the spec's rules."""

    def __init__(self, store: CatalogStore) -> None:
        self.store = store

    async def namespace(self, warehouse: WarehouseRecord, namespace: Namespace) -> NamespaceRecord:
        record = await self.store.get_namespace(warehouse.id, namespace.key)
        if record is None:
            raise NoSuchNamespace(f"Namespace does not exist: {namespace}")
        return record

    async def get(self, warehouse: WarehouseRecord, ident: TableIdent, kind: TabularKind) -> TabularRecord:
        """The table or view `ident`; answers as the spec asks when it (or its namespace) is missing."""
        record = await self.store.get_tabular(warehouse.id, ident.namespace.key, ident.name)
        if record is None or record.kind != kind:
            if await self.store.get_namespace(warehouse.id, ident.namespace.key) is None:
                raise NoSuchNamespace(f"Namespace does not exist: {ident.namespace}")
            if kind == "table":
                raise NoSuchTable(f"Table does not exist: {ident}")
            raise NoSuchView(f"View does not exist: {ident}")
        return record

    async def ensure_name_free(self, namespace_id: str, ident: TableIdent, kind: TabularKind) -> None:
        """Tables and views share names: either one taking `ident` makes it unavailable."""
        taken = await self.store.name_exists(namespace_id, ident.name)
        if taken is not None:
            label = kind.capitalize() if taken == kind else f"{taken.capitalize()} with same name"
            raise AlreadyExists(f"{label} already exists: {ident}")

    async def rename(
        self, warehouse: WarehouseRecord, source: TableIdent, destination: TableIdent, kind: TabularKind
    ) -> None:
        record = await self.get(warehouse, source, kind)
        target = await self.namespace(warehouse, destination.namespace)
        if source == destination:
            return
        taken = await self.store.name_exists(target.id, destination.name)
        if taken is not None:
            # The Java reference's wording, which its clients and the compatibility kit match.
            label = taken.capitalize()
            raise AlreadyExists(f"Cannot rename {source} to {destination}. {label} already exists")
        await self.store.rename_tabular(record.id, target.id, destination.name, kind)
