"""The Kafka offsets half of the SQL store: the next offset per topic partition that a table's commits
cover. `swap` writes them in the commit's own transaction (`save_all_kafka_offsets`); ingestion reads them
back to resume."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, delete, insert, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.records import PendingCommit
from catalog.store.schema import kafka_offsets

# (table, topic, partition) keys per DELETE: well under SQLite's 32,766 bound parameters.
_KEYS_PER_DELETE = 3000


async def save_all_kafka_offsets(
    conn: AsyncConnection, commits: Sequence[tuple[str, PendingCommit]], now: datetime
) -> None:
    """Record the Kafka offsets each (table id, commit) advances its table to, in the commits'
    transaction: one DELETE and one INSERT for all of them (a transaction of a hundred tables was
    two round trips per table)."""
    # The tables' rows were just versioned in this transaction, so no other commit to these tables can
    # interleave here: delete-then-insert is a safe, portable upsert.
    rows = [
        {
            "tabular_id": tabular_id,
            "topic": commit.kafka.topic,
            "partition": partition,
            "next_offset": offset,
            "updated_at": now,
        }
        for tabular_id, commit in commits
        if commit.kafka is not None
        for partition, offset in commit.kafka.end.items()
    ]
    if not rows:
        return
    keys = [(r["tabular_id"], r["topic"], r["partition"]) for r in rows]
    for start in range(0, len(keys), _KEYS_PER_DELETE):
        chunk = keys[start : start + _KEYS_PER_DELETE]
        if len(chunk) == 1:
            [(tabular_id, topic, partition)] = chunk
            match = and_(
                kafka_offsets.c.tabular_id == tabular_id,
                kafka_offsets.c.topic == topic,
                kafka_offsets.c.partition == partition,
            )
        else:
            match = tuple_(kafka_offsets.c.tabular_id, kafka_offsets.c.topic, kafka_offsets.c.partition).in_(
                chunk
            )
        await conn.execute(delete(kafka_offsets).where(match))
    await conn.execute(insert(kafka_offsets), rows)


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
