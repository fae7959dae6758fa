"""Which tables a `floe maintain --shard` instance maintains: ingestion's split (`runtime.shards`), with a
dead-letter table kept with its table."""

from __future__ import annotations

from catalog.pipelines.columns import DLQ_SUFFIX
from runtime.shards import shard_of


def maintenance_shard_key(namespace: tuple[str, ...], name: str) -> str:
    """The dotted name `floe maintain --shard` divides a table by: ingestion's, a dead-letter table's
    that of its table (a table whose own name ends in the suffix is kept with the table named without
    it, which only decides who maintains it)."""
    return ".".join((*namespace, name.removesuffix(DLQ_SUFFIX)))


def maintenance_shard_of(namespace: tuple[str, ...], name: str, count: int) -> int:
    """The shard of a table for `floe maintain --shard i/n` (`runtime.shards`)."""
    return shard_of(maintenance_shard_key(namespace, name), count)


__all__ = ["maintenance_shard_key", "maintenance_shard_of"]
