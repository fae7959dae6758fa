"""Which instance of a sharded `floe ingest` or `floe maintain` (`--shard i/n`) handles a table.

A stable hash of the table's dotted name (`namespace.table`), the same in every process and release
(Python's `hash` of a string is salted per process), so n instances started with `--shard 0/n` …
`--shard n-1/n` split the tables between them without talking to each other, and the two commands
agree: `floe maintain --shard i/n` maintains the tables `floe ingest --shard i/n` writes (maintenance
keeps a dead-letter table with its table: `maintenance.worker.maintenance_shard_of`).
"""

from __future__ import annotations

import hashlib


def shard_of(name: str, count: int) -> int:
    """The shard (0..count-1) the table of dotted name `name` belongs to."""
    if count <= 1:
        return 0
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


__all__ = ["shard_of"]
