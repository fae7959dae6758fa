"""The ingestion service's lag and throughput per table, sampled by the catalog for the web console's
charts over a bounded window.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_metric_samples",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("table_name", sa.Text, nullable=False),
        sa.Column("bucket", sa.BigInteger, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("offset_lag", sa.BigInteger, nullable=True),
        sa.Column("time_lag_seconds", sa.Float, nullable=True),
        sa.Column("records_per_second", sa.Float, nullable=True),
        sa.UniqueConstraint("table_name", "bucket", name="uq_ingest_metric_samples_bucket"),
    )
    op.create_index("ix_ingest_metric_samples_at", "ingest_metric_samples", ["at"])


def downgrade() -> None:
    op.drop_index("ix_ingest_metric_samples_at", table_name="ingest_metric_samples")
    op.drop_table("ingest_metric_samples")
