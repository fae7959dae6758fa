"""The Kafka offsets half of the SQL store: the next offset per topic partition that a table's commits
cover. `swap` writes them in the commit's own transaction (`save_kafka_offsets`); ingestion reads them
back to resume."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.records import PendingCommit
from catalog.store.schema import kafka_offsets


async def save_kafka_offsets(
    conn: AsyncConnection, tabular_id: str, commit: PendingCommit, now: datetime
) -> None:
    """Record the Kafka offsets `commit` advances the table to, in the commit's transaction."""
    # The table's row was just versioned in this transaction, so no other commit to this table can
    # interleave here: delete-then-insert is a safe, portable upsert.
    progress = commit.kafka
    if progress is None or not progress.end:
        return
    await conn.execute(
        delete(kafka_offsets).where(
            and_(
                kafka_offsets.c.tabular_id == tabular_id,
                kafka_offsets.c.topic == progress.topic,
                kafka_offsets.c.partition.in_(list(progress.end)),
            )
        )
    )
    await conn.execute(
        insert(kafka_offsets),
        [
            {
                "tabular_id": tabular_id,
                "topic": progress.topic,
                "partition": partition,
                "next_offset": offset,
                "updated_at": now,
            }
            for partition, offset in progress.end.items()
        ],
    )


class KafkaOffsetStoreMixin:
    """Kafka offsets read on the engines of `SqlCatalogStore`."""

    async def _fetch(self, statement: Select[Any], params: dict[str, Any]) -> Sequence[Any]:
        raise NotImplementedError

    _KAFKA_OFFSETS = select(kafka_offsets.c.partition, kafka_offsets.c.next_offset).where(
        and_(
            kafka_offsets.c.tabular_id == bindparam("p_tabular"),
            kafka_offsets.c.topic == bindparam("p_topic"),
        )
    )

    async def get_kafka_offsets(self, tabular_id: str, topic: str) -> dict[int, int]:
        """The next offset per partition the table has committed for `topic`."""
        rows = await self._fetch(self._KAFKA_OFFSETS, {"p_tabular": tabular_id, "p_topic": topic})
        return {int(row[0]): int(row[1]) for row in rows}

    _KAFKA_TOPICS = select(
        kafka_offsets.c.topic,
        kafka_offsets.c.partition,
        kafka_offsets.c.next_offset,
        kafka_offsets.c.updated_at,
    ).where(kafka_offsets.c.tabular_id == bindparam("p_tabular"))

    async def list_kafka_offsets(self, tabular_id: str) -> list[tuple[str, int, int, datetime]]:
        """Every (topic, partition, next offset, updated at) the table has committed."""
        rows = await self._fetch(self._KAFKA_TOPICS, {"p_tabular": tabular_id})
        # SQLite hands back naive datetimes; every timestamp floe stores is UTC.
        return [
            (str(r[0]), int(r[1]), int(r[2]), r[3] if r[3].tzinfo else r[3].replace(tzinfo=UTC)) for r in rows
        ]
