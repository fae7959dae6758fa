"""Relational schema of the catalog (SQLAlchemy Core); Alembic migrations create it."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
)

metadata = MetaData()

warehouses = Table(
    "warehouses",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("location", Text, nullable=False),
    Column("properties", Text, nullable=False, server_default="{}"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

namespaces = Table(
    "namespaces",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("warehouse_id", String(36), ForeignKey("warehouses.id", ondelete="CASCADE"), nullable=False),
    # Levels joined by 0x1F; `parent_key` is the key of the parent ("" at the top level).
    Column("key", Text, nullable=False),
    Column("parent_key", Text, nullable=False),
    Column("properties", Text, nullable=False, server_default="{}"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("warehouse_id", "key", name="uq_namespaces_warehouse_key"),
    Index("ix_namespaces_parent", "warehouse_id", "parent_key"),
)

# Tables and views share one name space inside a namespace, as the spec requires.
tabulars = Table(
    "tabulars",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("namespace_id", String(36), ForeignKey("namespaces.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("kind", String(8), nullable=False),
    Column("metadata_location", Text, nullable=True),
    Column("metadata_json", Text, nullable=False),
    Column("version", Integer, nullable=False, server_default="0"),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("namespace_id", "name", name="uq_tabulars_namespace_name"),
)

table_metrics = Table(
    "table_metrics",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("tabular_id", String(36), ForeignKey("tabulars.id", ondelete="CASCADE"), nullable=False),
    Column("report_type", String(32), nullable=False),
    Column("report", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_table_metrics_tabular", "tabular_id"),
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("fingerprint", Text, nullable=False),
    Column("state", String(8), nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("response_body", Text, nullable=True),
    Column("content_type", String(128), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_idempotency_created", "created_at"),
)
