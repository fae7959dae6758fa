"""Revoked access tokens (`revoked_tokens`): a console sign-out ends its token on every catalog process.

A row names one token of a key by its `jti` until the token would have expired; the row whose `jti` is
`*` ends every token of the key issued up to `revoked_at` (written instead of more rows when a key has
many revoked tokens at once). See `catalog.service.revocation`.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "revoked_tokens",
        sa.Column("subject", sa.String(64), primary_key=True),
        sa.Column("jti", sa.String(64), primary_key=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_revoked_tokens_expires_at", "revoked_tokens", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_revoked_tokens_expires_at", table_name="revoked_tokens")
    op.drop_table("revoked_tokens")
