"""PostgreSQL stores the metadata JSON of a table's row compressed with LZ4 (migration 0014): pglz
cost PostgreSQL 1.9 ms of CPU per 100-snapshot table per commit, LZ4 0.5 ms."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from catalog.migrations import alembic_config
from devtools.postgres import LocalPostgres
from tests.api.catalog_thread import CatalogThread
from tests.api.test_idempotency import run_sql

pytestmark = pytest.mark.e2e

COMPRESSION = sa.text(
    "SELECT attname, attcompression::text FROM pg_attribute "
    "WHERE (attrelid, attname) IN (('tabulars'::regclass, 'metadata_json'), "
    "('idempotency_keys'::regclass, 'response_body')) ORDER BY attname"
)


def test_a_tables_metadata_json_is_stored_lz4_compressed(postgres: LocalPostgres) -> None:
    url = postgres.create_database("floe_lz4")
    with CatalogThread(url) as server:
        catalog = server.catalog()
        catalog.create_namespace("ns")
        # Over PostgreSQL's 2 KB threshold, so the value is compressed (as a table with snapshots is).
        properties = {f"note.{i}": "a streaming table's metadata " * 4 for i in range(100)}
        table = catalog.create_table("ns.t", Schema(NestedField(1, "id", LongType())), properties=properties)
        table.transaction().set_properties({"owner": "team-a"}).commit_transaction()
        assert catalog.load_table("ns.t").properties["owner"] == "team-a"
    assert run_sql(url, COMPRESSION) == [("metadata_json", "l"), ("response_body", "l")]
    compressed = run_sql(url, sa.text("SELECT pg_column_compression(metadata_json) FROM tabulars"))
    assert compressed == [("lz4",)]

    # Down to 0013 the columns are pglz again (PostgreSQL's default); the rows stay readable either way.
    command.downgrade(alembic_config(url), "0013")
    assert run_sql(url, COMPRESSION) == [("metadata_json", "p"), ("response_body", "p")]
    command.upgrade(alembic_config(url), "head")
    with CatalogThread(url) as server:
        assert server.catalog().load_table("ns.t").properties["owner"] == "team-a"
