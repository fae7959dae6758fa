"""The pipeline half of the SQL store: revisions of the applied floe.yaml (`SqlCatalogStore` inherits
these methods, like the security ones)."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.errors import CommitFailed
from catalog.store.schema import pipeline_revisions


@dataclass(frozen=True, slots=True)
class PipelineRevisionRecord:
    revision: int
    warehouse: str
    config: dict[str, Any]
    plan: list[dict[str, Any]]
    applied_by: str
    applied_at: datetime


def _aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything floe stores is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class PipelineStoreMixin:
    """Pipeline revisions on the same engines as the catalog tables."""

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _writing(self, *, change: bool = False) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def latest_pipeline_revision(self) -> PipelineRevisionRecord | None:
        revisions = await self.list_pipeline_revisions(limit=1)
        return revisions[0] if revisions else None

    async def list_pipeline_revisions(
        self, *, limit: int = 100, revision: int | None = None
    ) -> list[PipelineRevisionRecord]:
        """Revisions newest first (only `revision`, when given)."""
        query = select(pipeline_revisions).order_by(pipeline_revisions.c.revision.desc()).limit(limit)
        if revision is not None:
            query = query.where(pipeline_revisions.c.revision == revision)
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return [
            PipelineRevisionRecord(
                row.revision,
                row.warehouse,
                json.loads(row.config),
                json.loads(row.plan),
                row.applied_by,
                _aware(row.applied_at),
            )
            for row in rows
        ]

    async def add_pipeline_revision(
        self,
        *,
        after: int,
        warehouse: str,
        config: dict[str, Any],
        plan: list[dict[str, Any]],
        applied_by: str,
    ) -> PipelineRevisionRecord:
        """Store revision `after + 1`; `CommitFailed` when another apply stored a revision since the
        caller read revision `after` (0: none)."""
        now = datetime.now(UTC)
        revision = after + 1
        try:
            async with self._writing(change=True) as conn:
                latest = (await conn.execute(select(func.max(pipeline_revisions.c.revision)))).scalar()
                if (latest or 0) != after:
                    raise CommitFailed(
                        f"Another apply stored pipeline revision {latest} meanwhile: re-run the apply"
                    )
                await conn.execute(
                    insert(pipeline_revisions).values(
                        revision=revision,
                        warehouse=warehouse,
                        config=json.dumps(config),
                        plan=json.dumps(plan),
                        applied_by=applied_by,
                        applied_at=now,
                    )
                )
        except IntegrityError as exc:
            raise CommitFailed(
                f"Another apply stored pipeline revision {revision} meanwhile: re-run the apply"
            ) from exc
        return PipelineRevisionRecord(revision, warehouse, config, plan, applied_by, now)


__all__ = ["PipelineRevisionRecord", "PipelineStoreMixin"]
