"""Audit entries count the requests they stand for (`audit_log.count`): identical successful token
requests of one key from one address within a window are recorded as one entry (see
`catalog.service.audit.AuditWriter.record_repeatable`).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("count", sa.Integer, nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("count")
