"""The audit log's listing query: newest first by time (ties by id), narrowed by `AuditFilter`.

Entries are not inserted in time order (a summary of repeated token requests carries the time of the
first of them and is written when its window ends; a request's entry is written when it is answered),
so the order is the entries' time, not their ids; the page cursor (`before`, an id) continues after
that entry's (time, id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import String, and_, literal, or_, select

from catalog.store.schema import api_keys, audit_log, clusters

if TYPE_CHECKING:
    from sqlalchemy import Select

    from catalog.store.security import AuditFilter

# The descriptions of floe's own pipeline keys, `pipeline-<purpose>-<cluster>` (floe.cli.pipeline_keys):
# writer keys of that cluster, which ingestion and maintenance run under.
PIPELINE_KEY_PREFIXES = ("pipeline-ingest-", "pipeline-maintain-")


def pipeline_subjects() -> Select[Any]:
    """The client ids of floe's pipeline keys: a cluster's writer keys named for it."""
    named = [api_keys.c.description == literal(p, String) + clusters.c.name for p in PIPELINE_KEY_PREFIXES]
    return (
        select(api_keys.c.client_id)
        .join(clusters, api_keys.c.cluster_id == clusters.c.id)
        .where(api_keys.c.role == "writer", or_(*named))
    )


def audit_query(
    cluster: str | None, limit: int, before_id: int | None, filters: AuditFilter | None
) -> Select[Any]:
    """A page of entries, newest first, after the entry `before_id` (an id no entry has: those below it)."""
    query = select(audit_log).order_by(audit_log.c.at.desc(), audit_log.c.id.desc()).limit(limit)
    if cluster is not None:
        query = query.where(audit_log.c.cluster == cluster)
    if before_id is not None:
        cursor = select(audit_log.c.at).where(audit_log.c.id == before_id).scalar_subquery()
        query = query.where(
            or_(
                audit_log.c.at < cursor,
                and_(audit_log.c.at == cursor, audit_log.c.id < before_id),
                and_(cursor.is_(None), audit_log.c.id < before_id),
            )
        )
    if filters is None:
        return query
    if filters.subject:
        query = query.where(audit_log.c.subject == filters.subject)
    if filters.action:
        query = query.where(audit_log.c.action == filters.action)
    if filters.target:
        # A substring of the target (`table=orders`); LIKE's wildcards in it are taken literally.
        pattern = filters.target.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        query = query.where(audit_log.c.target.like(f"%{pattern}%", escape="\\"))
    if filters.outcome:
        query = query.where(audit_log.c.outcome == filters.outcome)
    if filters.since is not None:
        query = query.where(audit_log.c.at >= filters.since)
    if filters.until is not None:
        query = query.where(audit_log.c.at < filters.until)
    if filters.hide_pipeline:
        query = query.where(audit_log.c.subject.not_in(pipeline_subjects()))
    return query
