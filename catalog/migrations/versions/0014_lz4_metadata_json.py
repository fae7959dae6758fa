"""PostgreSQL compresses the large JSON columns with LZ4 instead of its default pglz.

Every commit rewrites the table's row with its whole metadata JSON (about 1 KB per snapshot kept: 100
to 130 KB for a streaming table at floe's default of 100 snapshots), and PostgreSQL compresses a value
that large before storing it out of line. pglz cost PostgreSQL 1.9 ms of CPU per table per commit at
that size, 186 ms for ingestion's transaction of a hundred tables; LZ4 costs 0.5 ms (49 ms), measured
on one machine in one run (docs/operations/performance.md). Rows keep their old compression until a
commit rewrites them, which the next commit of each table does.

Only on PostgreSQL 14 and later built with LZ4 (Debian's, the official images'); elsewhere nothing
changes. SQLite stores text uncompressed.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The columns that hold a table's or view's whole metadata JSON (a commit's idempotent answer does too).
COLUMNS = (("tabulars", "metadata_json"), ("idempotency_keys", "response_body"))


def _lz4_available(connection: sa.Connection) -> bool:
    if connection.dialect.name != "postgresql":
        return False
    if int(connection.execute(sa.text("SHOW server_version_num")).scalar_one()) < 140000:
        return False
    methods = connection.execute(
        sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar_one_or_none()
    return methods is not None and "lz4" in methods


def _set_compression(method: str) -> None:
    connection = op.get_bind()
    if not _lz4_available(connection):
        return
    for table, column in COLUMNS:
        op.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')


def upgrade() -> None:
    _set_compression("lz4")


def downgrade() -> None:
    _set_compression("pglz")
