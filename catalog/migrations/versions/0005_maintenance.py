"""Maintenance passes recorded by `floe maintain` (what ran on a table, how long, before and after).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "maintenance_passes",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("warehouse", sa.String(255), nullable=False),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("table_name", sa.Text, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_seconds", sa.Float, nullable=False),
        sa.Column("actions", sa.Text, nullable=False, server_default="[]"),
        sa.Column("before", sa.Text, nullable=False, server_default="{}"),
        sa.Column("after", sa.Text, nullable=False, server_default="{}"),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("recorded_by", sa.String(255), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )
    op.create_index(
        "ix_maintenance_passes_table", "maintenance_passes", ["warehouse", "namespace", "table_name", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_maintenance_passes_table", table_name="maintenance_passes")
    op.drop_table("maintenance_passes")
