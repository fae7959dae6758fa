"""Which instance of a sharded `floe ingest` or `floe maintain` (`--shard i/n`) handles a table.

A stable hash of the table's dotted name (`namespace.table`), the same in every process and release
(Python's `hash` of a string is salted per process), so n instances started with `--shard 0/n` …
`--shard n-1/n` split the tables between them without talking to each other, and the two commands
agree: `floe maintain --shard i/n` maintains the tables `floe ingest --shard i/n` writes (maintenance
keeps a dead-letter table with its table: `maintenance.shards.maintenance_shard_key`).

`floe ingest --shard auto` divides the tables among the live instances the catalog names instead
(`owner_of`, rendezvous hashing): every instance computes the same owner from the same member list, and
when an instance leaves, only its own tables move (to the others, spread evenly), the others' stay.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def shard_of(name: str, count: int) -> int:
    """The shard (0..count-1) the table of dotted name `name` belongs to."""
    if count <= 1:
        return 0
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def owner_of(name: str, members: Iterable[str]) -> str | None:
    """The member (of `members`, instance names) that takes the table of dotted name `name`: the one
    whose hash with the name is highest; None when there is no member."""
    best: tuple[bytes, str] | None = None
    for member in members:
        score = hashlib.sha256(f"{member}\n{name}".encode()).digest()[:8]
        if best is None or (score, member) > best:
            best = (score, member)
    return None if best is None else best[1]


__all__ = ["owner_of", "shard_of"]
