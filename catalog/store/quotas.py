"""Per-cluster counts for quotas and the console, inside the transaction that creates.

A cluster is a top-level namespace and every namespace below it (keys `root` and `root\\x1f…`). A create
that is subject to a quota counts what the cluster holds in its own write transaction and inserts only
below the quota. On PostgreSQL the transaction first takes a transaction-scoped advisory lock of the
cluster, so two creates of one cluster count one after the other (without it, both could count N-1 and
both insert); it is taken before any row lock and only by quota-checked creates, so it cannot deadlock
with other writers. SQLite write transactions start with `BEGIN IMMEDIATE` and run one at a time anyway.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.errors import QuotaExceeded
from catalog.store.records import ClusterQuota
from catalog.store.schema import namespaces, tabulars

SEPARATOR = "\x1f"


def in_cluster(warehouse_id: str, root: str) -> ColumnElement[bool]:
    """Namespaces of the cluster `root`: exact comparisons (SQLite's LIKE ignores case)."""
    prefix = root + SEPARATOR
    return (namespaces.c.warehouse_id == warehouse_id) & or_(
        namespaces.c.key == root, func.substr(namespaces.c.key, 1, len(prefix)) == prefix
    )


def count_statement(warehouse_id: str, root: str, kind: str) -> Any:
    """How many namespaces (`kind` "namespace"), tables or views the cluster holds."""
    where = in_cluster(warehouse_id, root)
    if kind == "namespace":
        return select(func.count()).select_from(namespaces).where(where)
    joined = tabulars.join(namespaces, tabulars.c.namespace_id == namespaces.c.id)
    return select(func.count()).select_from(joined).where(where, tabulars.c.kind == kind)


def _lock_id(quota: ClusterQuota) -> int:
    digest = hashlib.sha256(f"floe-quota\x00{quota.warehouse_id}\x00{quota.root}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def lock_clusters(conn: AsyncConnection, quotas: list[ClusterQuota]) -> None:
    """Hold each cluster's quota lock until the transaction ends (PostgreSQL; in a fixed order)."""
    if conn.dialect.name != "postgresql":
        return
    for lock in sorted({_lock_id(q) for q in quotas}):
        await conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": lock})


async def check_quota(conn: AsyncConnection, quota: ClusterQuota, kind: str) -> None:
    """Raise `QuotaExceeded` unless the cluster holds fewer `kind`s than its quota (call it under
    `lock_clusters`, before the insert)."""
    held = int((await conn.execute(count_statement(quota.warehouse_id, quota.root, kind))).scalar_one())
    if held >= quota.limit:
        shown = quota.root if len(quota.root) <= 128 else quota.root[:128] + "…"
        raise QuotaExceeded(
            f"Quota exceeded: cluster {shown} already holds {held} {kind}s, its quota of {quota.limit} "
            f"({quota.variable}); drop some or ask the operator to raise it"
        )
