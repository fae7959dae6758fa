"""The live `--shard auto` instances of `floe ingest` and `floe maintain` (`instance_leases`): each
instance renews its row's lease; the tables are divided among the rows whose lease has not expired
(see catalog/service/leases.py).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instance_leases",
        sa.Column("scope", sa.String(128), primary_key=True),
        sa.Column("group_name", sa.String(128), primary_key=True),
        sa.Column("member", sa.String(128), primary_key=True),
        sa.Column("joined_at_ms", sa.BigInteger, nullable=False),
        sa.Column("expires_at_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("instance_leases")
