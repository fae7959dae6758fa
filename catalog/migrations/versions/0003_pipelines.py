"""Pipeline configuration revisions: each `floe apply` stores the desired state it applied.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pipeline_revisions",
        sa.Column("revision", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("warehouse", sa.String(255), nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("plan", sa.Text, nullable=False),
        sa.Column("applied_by", sa.String(255), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()),
    )


def downgrade() -> None:
    op.drop_table("pipeline_revisions")
