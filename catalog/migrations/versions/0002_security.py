"""Security: clusters, API keys, token signing keys, audit log, failed-authentication counters.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    if nullable:
        return sa.Column(name, sa.DateTime(timezone=True), nullable=True)
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("warehouse_id", sa.String(36), sa.ForeignKey("warehouses.id"), nullable=False),
        sa.Column("properties", sa.Text, nullable=False, server_default="{}"),
        _timestamp("created_at"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("client_id", sa.String(64), nullable=False, unique=True),
        sa.Column("secret_hash", sa.Text, nullable=False),
        sa.Column(
            "cluster_id", sa.String(36), sa.ForeignKey("clusters.id", ondelete="CASCADE"), nullable=True
        ),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("description", sa.Text, nullable=False, server_default=""),
        sa.Column("created_by", sa.String(64), nullable=False, server_default=""),
        _timestamp("created_at"),
        _timestamp("expires_at", nullable=True),
        _timestamp("revoked_at", nullable=True),
        _timestamp("last_used_at", nullable=True),
    )
    op.create_table(
        "signing_keys",
        sa.Column("kid", sa.String(64), primary_key=True),
        sa.Column("private_jwk", sa.Text, nullable=False),
        _timestamp("created_at"),
        _timestamp("retired_at", nullable=True),
    )
    op.create_table(
        "audit_log",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
        _timestamp("at"),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("cluster", sa.String(255), nullable=True),
        sa.Column("action", sa.String(128), nullable=False),
        sa.Column("target", sa.Text, nullable=False, server_default=""),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False, server_default=""),
        sa.Column("source", sa.String(64), nullable=False, server_default=""),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"])
    op.create_table(
        "auth_failures",
        sa.Column("key", sa.String(128), primary_key=True),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("auth_failures")
    op.drop_table("audit_log")
    op.drop_table("signing_keys")
    op.drop_table("api_keys")
    op.drop_table("clusters")
