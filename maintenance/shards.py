"""Which tables a `floe maintain --shard` instance maintains: ingestion's split (`runtime.shards`), with a
dead-letter table kept with its table."""

from __future__ import annotations

from catalog.pipelines.columns import DLQ_SUFFIX


def maintenance_shard_key(namespace: tuple[str, ...], name: str) -> str:
    """The dotted name `floe maintain --shard` divides a table by: ingestion's, a dead-letter table's
    that of its table (a table whose own name ends in the suffix is kept with the table named without
    it, which only decides who maintains it)."""
    return ".".join((*namespace, name.removesuffix(DLQ_SUFFIX)))


__all__ = ["maintenance_shard_key"]
