"""Kafka offsets committed per table (the ingestion exactly-once fence).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kafka_offsets",
        sa.Column(
            "tabular_id", sa.String(36), sa.ForeignKey("tabulars.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("topic", sa.String(255), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("next_offset", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )


def downgrade() -> None:
    op.drop_table("kafka_offsets")
