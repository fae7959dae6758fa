"""The reads of a multi-table commit, one query each for all of its tables.

`/transactions/commit` from ingestion names up to a hundred tables; reading each table's row and its
stored Kafka offsets one query at a time was two database round trips per table, most of a
transaction's time at a thousand tables. The rows and the offsets are still read before the swap,
whose compare-and-swap on each table's version refuses the commit if any of them moved meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from catalog.store.records import TabularRecord
from catalog.store.schema import kafka_offsets, namespaces, tabular_record_columns, tabulars

# Keys per IN list: SQLite allows 32,766 bound parameters, PostgreSQL 65,535.
_CHUNK = 500


class CommitReadsStoreMixin:
    """Batched reads for the commit path, on the engines of `SqlCatalogStore`."""

    def _reading(self) -> AbstractAsyncContextManager[AsyncConnection]:
        raise NotImplementedError

    async def get_tabulars(
        self, warehouse_id: str, names: Sequence[tuple[str, str]], *, metadata_json: bool = True
    ) -> dict[tuple[str, str], TabularRecord]:
        """The tables and views (namespace key, name) of a warehouse that exist, by that key; without
        `metadata_json`, each record's `metadata_json` is empty (`tabular_record_columns`)."""
        found: dict[tuple[str, str], TabularRecord] = {}
        wanted = list(dict.fromkeys(names))
        async with self._reading() as conn:
            for start in range(0, len(wanted), _CHUNK):
                query = (
                    select(*tabular_record_columns(metadata_json=metadata_json))
                    .join(namespaces, namespaces.c.id == tabulars.c.namespace_id)
                    .where(
                        namespaces.c.warehouse_id == warehouse_id,
                        tuple_(namespaces.c.key, tabulars.c.name).in_(wanted[start : start + _CHUNK]),
                    )
                )
                for row in (await conn.execute(query)).all():
                    record = TabularRecord(*row)
                    found[(record.namespace_key, record.name)] = record
        return found

    async def get_kafka_offsets_of(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[int, int]]:
        """The next offset per partition each (table id, topic) has committed ({} when none)."""
        found: dict[tuple[str, str], dict[int, int]] = {key: {} for key in keys}
        wanted = list(found)
        async with self._reading() as conn:
            for start in range(0, len(wanted), _CHUNK):
                query = select(
                    kafka_offsets.c.tabular_id,
                    kafka_offsets.c.topic,
                    kafka_offsets.c.partition,
                    kafka_offsets.c.next_offset,
                ).where(
                    tuple_(kafka_offsets.c.tabular_id, kafka_offsets.c.topic).in_(
                        wanted[start : start + _CHUNK]
                    )
                )
                for row in (await conn.execute(query)).all():
                    found[(str(row[0]), str(row[1]))][int(row[2])] = int(row[3])
        return found
