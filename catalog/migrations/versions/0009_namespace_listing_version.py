"""Namespaces count the changes to their list of tables and views (`namespaces.listing_version`), so a
catalog process can serve a cached listing after one indexed read that proves it current.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("namespaces") as batch:
        batch.add_column(sa.Column("listing_version", sa.BigInteger, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("namespaces") as batch:
        batch.drop_column("listing_version")
