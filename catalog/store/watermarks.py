"""The watermark half of the SQL store: the broker end offsets ingestion reports per table partition
(`kafka_end_offsets`), read beside the table's committed offsets (`kafka_offsets`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from sqlalchemy import delete, insert, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.schema import kafka_end_offsets, kafka_offsets, namespaces, tabulars
from catalog.watermarks import Observation, PartitionState

# (tabular id, topic) → partition → …
TopicKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class TopicProgress:
    """A table's committed next offsets and observed partition states for one topic."""

    committed: dict[int, int]
    states: dict[int, PartitionState]


Transition = Callable[[Mapping[int, PartitionState], Mapping[int, int]], dict[int, PartitionState]]


def _state(row: object) -> PartitionState:
    pending = None
    if row.pending_end_offset is not None and row.pending_observed_at_ms is not None:  # type: ignore[attr-defined]
        pending = Observation(int(row.pending_end_offset), int(row.pending_observed_at_ms))  # type: ignore[attr-defined]
    return PartitionState(
        Observation(int(row.end_offset), int(row.observed_at_ms)),  # type: ignore[attr-defined]
        pending,
        None if row.caught_up_at_ms is None else int(row.caught_up_at_ms),  # type: ignore[attr-defined]
    )


async def _progress(conn: AsyncConnection, keys: Sequence[TopicKey]) -> dict[TopicKey, TopicProgress]:
    found = {key: TopicProgress({}, {}) for key in keys}
    if not keys:
        return found
    committed = await conn.execute(
        select(
            kafka_offsets.c.tabular_id,
            kafka_offsets.c.topic,
            kafka_offsets.c.partition,
            kafka_offsets.c.next_offset,
        ).where(tuple_(kafka_offsets.c.tabular_id, kafka_offsets.c.topic).in_(list(keys)))
    )
    for row in committed:
        found[(row.tabular_id, row.topic)].committed[int(row.partition)] = int(row.next_offset)
    seen = await conn.execute(
        select(kafka_end_offsets).where(
            tuple_(kafka_end_offsets.c.tabular_id, kafka_end_offsets.c.topic).in_(list(keys))
        )
    )
    for row in seen:
        found[(row.tabular_id, row.topic)].states[int(row.partition)] = _state(row)
    return found


class WatermarkStoreMixin:
    """Watermark inputs on the engines of `SqlCatalogStore`."""

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    def _writing(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def topic_progress(self, tabular_id: str) -> dict[str, TopicProgress]:
        """Per topic, what the table committed and what ingestion saw of the broker."""
        async with self._reading() as conn:
            topics = await conn.execute(
                select(kafka_offsets.c.topic)
                .where(kafka_offsets.c.tabular_id == tabular_id)
                .union(select(kafka_end_offsets.c.topic).where(kafka_end_offsets.c.tabular_id == tabular_id))
            )
            keys = [(tabular_id, str(row[0])) for row in topics]
            found = await _progress(conn, keys)
        return {topic: progress for (_, topic), progress in found.items()}

    async def table_ids(
        self, warehouse_id: str, names: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The ids of the tables (namespace key, name) of a warehouse that exist, in one query."""
        if not names:
            return {}
        query = (
            select(namespaces.c.key, tabulars.c.name, tabulars.c.id)
            .join(namespaces, namespaces.c.id == tabulars.c.namespace_id)
            .where(
                namespaces.c.warehouse_id == warehouse_id,
                tabulars.c.kind == "table",
                tuple_(namespaces.c.key, tabulars.c.name).in_(list(set(names))),
            )
        )
        async with self._reading() as conn:
            rows = (await conn.execute(query)).all()
        return {(str(r[0]), str(r[1])): str(r[2]) for r in rows}

    async def observe_end_offsets(
        self, transitions: Mapping[TopicKey, Transition]
    ) -> dict[TopicKey, TopicProgress]:
        """Apply each table topic's transition (its reported end offsets) to its stored partition
        states, in one transaction; the progress after it."""
        keys = list(transitions)
        async with self._writing() as conn:
            found = await _progress(conn, keys)
            rows = []
            for key, transition in transitions.items():
                progress = found[key]
                states = transition(progress.states, progress.committed)
                found[key] = TopicProgress(progress.committed, states)
                rows += [
                    {
                        "tabular_id": key[0],
                        "topic": key[1],
                        "partition": partition,
                        "end_offset": state.latest.end_offset,
                        "observed_at_ms": state.latest.at_ms,
                        "pending_end_offset": None if state.pending is None else state.pending.end_offset,
                        "pending_observed_at_ms": None if state.pending is None else state.pending.at_ms,
                        "caught_up_at_ms": state.caught_up_at_ms,
                    }
                    for partition, state in states.items()
                ]
            if keys:
                await conn.execute(
                    delete(kafka_end_offsets).where(
                        tuple_(kafka_end_offsets.c.tabular_id, kafka_end_offsets.c.topic).in_(keys)
                    )
                )
            if rows:
                await conn.execute(insert(kafka_end_offsets), rows)
        return found
