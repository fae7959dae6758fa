"""Idempotency keys scoped by caller, with leases on pending keys.

Stored keys become sha256(caller + Idempotency-Key), so rows written before cannot be matched any more;
they are only a retry cache, so the table is recreated empty (on SQLite and PostgreSQL alike).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _create(*, leases: bool) -> None:
    columns: list[sa.Column[object]] = [
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("response_body", sa.Text, nullable=True),
        sa.Column("content_type", sa.String(128), nullable=True),
    ]
    if leases:
        columns += [
            sa.Column("owner", sa.String(64), nullable=True),
            sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        ]
    columns.append(
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now())
    )
    op.create_table("idempotency_keys", *columns)
    op.create_index("ix_idempotency_created", "idempotency_keys", ["created_at"])


def _drop() -> None:
    op.drop_index("ix_idempotency_created", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")


def upgrade() -> None:
    _drop()
    _create(leases=True)


def downgrade() -> None:
    _drop()
    _create(leases=False)
