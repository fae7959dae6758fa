"""`TableHeads`: the table rows a catalog process's commits left, guessed for its next commits, and
read again for a while after a guess turned out stale (another process commits to the table too)."""

from __future__ import annotations

from catalog.service.table_heads import MAX_MISS_SHIFT, TableHeads
from catalog.store import TabularRecord

KEY = ("wh", "ns", "t")


def row(version: int) -> TabularRecord:
    return TabularRecord("id", "ns-id", "ns", "t", "table", f"file:///w/{version}.metadata.json", "", version)


def guesses(heads: TableHeads, commits: int) -> list[bool]:
    """Whether each of the next `commits` commits guessed; each lands, the row read when not guessed."""
    made = []
    for _ in range(commits):
        guess = heads.guess(KEY)
        made.append(guess is not None)
        heads.committed(KEY, row(len(made)), guessed=guess is not None)
    return made


def test_a_table_is_guessed_once_this_process_committed_to_it() -> None:
    heads = TableHeads()
    assert heads.guess(KEY) is None, "never committed here: read"
    heads.committed(KEY, row(1), guessed=False)
    assert heads.guess(KEY) == row(1)
    assert heads.guess(("wh", "ns", "other")) is None


def test_after_stale_guesses_in_a_row_the_next_two_four_then_up_to_64_commits_read_first() -> None:
    heads = TableHeads()
    heads.committed(KEY, row(0), guessed=False)
    for misses in range(1, MAX_MISS_SHIFT + 3):
        assert heads.guess(KEY) is not None
        heads.missed(KEY)
        assert heads.guess(KEY) is None, "until the commit read on lands"
        heads.committed(KEY, row(misses), guessed=False)
        skipped = 2 ** min(misses, MAX_MISS_SHIFT)
        assert guesses(heads, skipped) == [False] * skipped
    # A guess that lands resets the count: the next miss skips two again.
    assert guesses(heads, 3) == [True, True, True]
    heads.missed(KEY)
    heads.committed(KEY, row(100), guessed=False)
    assert guesses(heads, 3) == [False, False, True]


def test_a_miss_of_an_unknown_table_is_ignored_and_the_oldest_tables_are_forgotten() -> None:
    heads = TableHeads(max_tables=2)
    heads.missed(KEY)
    assert heads.guess(KEY) is None
    for name in ("a", "b", "c"):
        heads.committed(("wh", "ns", name), row(1), guessed=False)
    assert heads.guess(("wh", "ns", "a")) is None
    assert heads.guess(("wh", "ns", "c")) is not None
