"""SharedReads: concurrent loads of one table share a version check, and none is answered by a read
that started before it arrived (a commit a load already saw finish is never hidden from it)."""

from __future__ import annotations

import asyncio

import pytest

from catalog.service.shared_reads import SharedReads


class VersionedRow:
    """A row whose value a read takes when it starts, answering after `delay` (a database round trip)."""

    def __init__(self, delay: float = 0.02) -> None:
        self.version = 0
        self.delay = delay
        self.reads: list[str] = []
        self.fail_next = False

    async def read(self, key: str) -> tuple[str, int]:
        self.reads.append(key)
        seen = self.version  # the statement's snapshot: taken when the read starts
        failing, self.fail_next = self.fail_next, False
        await asyncio.sleep(self.delay)
        if failing:
            raise ConnectionError("database went away")
        return key, seen


async def test_callers_arriving_together_share_one_read() -> None:
    row = VersionedRow()
    reads = SharedReads(row.read)
    results = await asyncio.gather(*(reads.read("t") for _ in range(20)))
    assert results == [("t", 0)] * 20
    assert row.reads == ["t"]
    assert len(reads) == 0


async def test_a_caller_arriving_during_a_read_waits_for_the_next_one() -> None:
    row = VersionedRow()
    reads = SharedReads(row.read)
    first = asyncio.ensure_future(reads.read("t"))
    await asyncio.sleep(0.005)  # the first read is in flight and has seen version 0
    row.version = 1  # a commit (through any process) finishes now
    late = [asyncio.ensure_future(reads.read("t")) for _ in range(10)]
    assert await first == ("t", 0)
    # Every caller that arrived after the commit sees it, all through one more read.
    assert await asyncio.gather(*late) == [("t", 1)] * 10
    assert row.reads == ["t", "t"]


async def test_at_most_one_read_in_flight_and_one_waiting_per_key() -> None:
    row = VersionedRow(delay=0.01)
    reads = SharedReads(row.read)
    callers: list[asyncio.Future[tuple[str, int]]] = []
    for _ in range(10):  # a steady stream of loads over about ten round trips
        callers.extend(asyncio.ensure_future(reads.read("t")) for _ in range(5))
        await asyncio.sleep(0.01)
    await asyncio.gather(*callers)
    assert 5 <= len(row.reads) <= 12  # 50 callers, a read per round trip
    assert len(reads) == 0


async def test_keys_are_read_independently() -> None:
    row = VersionedRow()
    reads = SharedReads(row.read)
    assert list(await asyncio.gather(reads.read("a"), reads.read("b"), reads.read("a"))) == [
        ("a", 0),
        ("b", 0),
        ("a", 0),
    ]
    assert sorted(row.reads) == ["a", "b"]


async def test_a_failure_reaches_every_caller_and_the_next_call_reads_again() -> None:
    row = VersionedRow()
    reads = SharedReads(row.read)
    row.fail_next = True
    outcomes = await asyncio.gather(*(reads.read("t") for _ in range(3)), return_exceptions=True)
    assert all(isinstance(outcome, ConnectionError) for outcome in outcomes)
    assert await reads.read("t") == ("t", 0)
    assert row.reads == ["t", "t"]


async def test_a_caller_that_goes_away_does_not_cancel_the_others_read() -> None:
    row = VersionedRow()
    reads = SharedReads(row.read)
    leaving = asyncio.ensure_future(reads.read("t"))
    staying = asyncio.ensure_future(reads.read("t"))
    await asyncio.sleep(0.005)
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert await staying == ("t", 0)
    assert row.reads == ["t"]
