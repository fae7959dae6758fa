"""The transactional outbox of commit events (`commit_events`): one row per table or view change,
inserted in the transaction that makes the change, deleted once the events broker acknowledged it
(see catalog/commit_events.py and docs/commit-events.md).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "commit_events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("event_type", sa.String(64), nullable=False),
        # No foreign key: a drop's event outlives its table's row.
        sa.Column("tabular_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("warehouse", sa.String(255), nullable=False),
        sa.Column("namespace", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("commit_events")
