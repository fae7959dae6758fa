"""The broker end offsets ingestion last saw per table partition (`kafka_end_offsets`): what the
catalog compares with a table's committed offsets to derive its completeness watermark
(see catalog/watermarks.py).

Per partition: the latest observation (end offset, when it was taken), an older observation not yet
reached by the table's commits (`pending_*`), and the latest time the table was seen caught up.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kafka_end_offsets",
        sa.Column(
            "tabular_id", sa.String(36), sa.ForeignKey("tabulars.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("topic", sa.String(255), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("end_offset", sa.BigInteger, nullable=False),
        sa.Column("observed_at_ms", sa.BigInteger, nullable=False),
        sa.Column("pending_end_offset", sa.BigInteger, nullable=True),
        sa.Column("pending_observed_at_ms", sa.BigInteger, nullable=True),
        sa.Column("caught_up_at_ms", sa.BigInteger, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("kafka_end_offsets")
