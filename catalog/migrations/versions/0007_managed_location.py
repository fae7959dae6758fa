"""Tables remember the catalog-assigned folder they were created in (`tabulars.managed_location`), so a
purge can delete everything in it, files of commits that lost a race included.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tabulars") as batch:
        batch.add_column(sa.Column("managed_location", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tabulars") as batch:
        batch.drop_column("managed_location")
