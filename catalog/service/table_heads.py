"""What each table's row was after this process's last commit to it (`TableHeads`): the next commit to
the table starts from it instead of reading the row.

Why (measured, `benchmarks/results/catalog.md`): a commit to one table made two database round trips,
the row's read and the compare-and-swap, and each round trip's send and wake-up cost more CPU than
anything the commit computes. A table committed to again and again (an ingestion pipeline's
micro-batches, a writer's properties) by one catalog process is, nearly always, still as that process
left it.

Why it is safe: the swap is `UPDATE ... WHERE id = ? AND version = ?`, and every change of a table's row
moves its version (commits, register, rename; a drop deletes the row, a create makes a new id). A swap
built on a stale head therefore changes nothing; the commit is then prepared again on a fresh read, as
after any lost race, and its requirements are judged on that fresh state only.

A head that turned out stale means another process commits to the table too; guessing again at once
would waste a metadata file and a swap per commit, so after each stale guess in a row the table's
next 2, 4, ... 64 commits read the row first.
"""

from __future__ import annotations

from dataclasses import dataclass

from cachetools import LRUCache

from catalog.store import TabularRecord

# Tables remembered (a few hundred bytes each); the least recently committed are forgotten first.
MAX_TABLES = 100_000
# After n stale guesses in a row, the next 2**n commits (at most 2**MAX_MISS_SHIFT) read the row first.
MAX_MISS_SHIFT = 6

HeadKey = tuple[str, str, str]  # (warehouse id, namespace key, table name)


@dataclass(slots=True)
class _Head:
    record: TabularRecord | None  # None after a stale guess, until the next commit lands
    misses: int = 0  # stale guesses in a row
    skip: int = 0  # commits still to prepare on a fresh read before guessing again


class TableHeads:
    """The rows (without their metadata JSON) tables had after this process's last commits to them.
    One per event loop: no locking needed."""

    def __init__(self, max_tables: int = MAX_TABLES) -> None:
        self._heads: LRUCache[HeadKey, _Head] = LRUCache(max_tables)

    def guess(self, key: HeadKey) -> TabularRecord | None:
        """The row `key` had after this process's last commit to it, or None: unknown, or the table
        is reading its row for now (recent stale guesses)."""
        head = self._heads.get(key)
        if head is None or head.record is None:
            return None
        if head.skip:
            head.skip -= 1
            return None
        return head.record

    def committed(self, key: HeadKey, record: TabularRecord, *, guessed: bool) -> None:
        """A commit to `key` landed, leaving its row as `record`; `guessed`: it was built on a guess."""
        head = self._heads.get(key)
        if head is None:
            self._heads[key] = _Head(record)
            return
        head.record = record
        if guessed:
            head.misses = 0

    def missed(self, key: HeadKey) -> None:
        """The head guessed for `key` was stale (or its requirements failed on it)."""
        head = self._heads.get(key)
        if head is None:
            return
        head.record = None
        head.misses = min(head.misses + 1, MAX_MISS_SHIFT)
        head.skip = 2**head.misses
