"""Catalog core: warehouses, namespaces, tables and views, metrics reports, idempotency keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _timestamp(name: str) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def upgrade() -> None:
    op.create_table(
        "warehouses",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("properties", sa.Text, nullable=False, server_default="{}"),
        _timestamp("created_at"),
    )
    op.create_table(
        "namespaces",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column(
            "warehouse_id", sa.String(36), sa.ForeignKey("warehouses.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("parent_key", sa.Text, nullable=False),
        sa.Column("properties", sa.Text, nullable=False, server_default="{}"),
        _timestamp("created_at"),
        sa.UniqueConstraint("warehouse_id", "key", name="uq_namespaces_warehouse_key"),
    )
    op.create_index("ix_namespaces_parent", "namespaces", ["warehouse_id", "parent_key"])
    op.create_table(
        "tabulars",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("namespace_id", sa.String(36), sa.ForeignKey("namespaces.id"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("metadata_location", sa.Text, nullable=True),
        sa.Column("metadata_json", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False, server_default="0"),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.UniqueConstraint("namespace_id", "name", name="uq_tabulars_namespace_name"),
    )
    op.create_table(
        "table_metrics",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column(
            "tabular_id", sa.String(36), sa.ForeignKey("tabulars.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("report_type", sa.String(32), nullable=False),
        sa.Column("report", sa.Text, nullable=False),
        _timestamp("created_at"),
    )
    op.create_index("ix_table_metrics_tabular", "table_metrics", ["tabular_id"])
    op.create_table(
        "idempotency_keys",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("response_body", sa.Text, nullable=True),
        sa.Column("content_type", sa.String(128), nullable=True),
        _timestamp("created_at"),
    )
    op.create_index("ix_idempotency_created", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("table_metrics")
    op.drop_table("tabulars")
    op.drop_table("namespaces")
    op.drop_table("warehouses")
