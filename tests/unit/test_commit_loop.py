"""The commit loop shared by tables and views (`catalog.service.commit_loop`), without a database: a
store double that loses a given number of races, or fails mid-swap, and a real local storage."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc as sa_exc

from catalog.errors import CommitFailed, CommitStateUnknown
from catalog.identifiers import Namespace, TableIdent
from catalog.service.commit_loop import CommitAttempt, CommitLocks, CommitLoop, CommitTarget
from catalog.service.table_model import LoadedTable
from catalog.storage import Storage, StorageRunner
from catalog.store import PendingCommit

IDENT = TableIdent(Namespace.of(["ns"]), "v")


class RacingStore:
    """Loses the first `losses` swaps (another writer won), then lands; or raises `failure`."""

    def __init__(self, losses: int = 0, failure: BaseException | None = None) -> None:
        self.losses = losses
        self.failure = failure
        self.swaps: list[list[PendingCommit]] = []

    async def swap(self, commits: Sequence[PendingCommit], records: Any = None) -> bool:
        self.swaps.append(list(commits))
        if self.failure is not None:
            raise self.failure
        if self.losses:
            self.losses -= 1
            return False
        return True


def loop_of(store: RacingStore, retries: int = 3) -> CommitLoop:
    return CommitLoop(store, CommitLocks(), StorageRunner(2, 2, 30.0), retries, 1 << 20)  # type: ignore[arg-type]


def target_of(tmp_path: Path) -> CommitTarget:
    location = tmp_path.as_uri()
    return CommitTarget("wh", [IDENT], "view", "tenant", Storage(location, {}, location), {})


def preparing(tmp_path: Path) -> tuple[list[str], Any]:
    """A `prepare` that writes a new metadata file per attempt, and the locations it used."""
    locations: list[str] = []

    async def prepare() -> CommitAttempt:
        location = f"{tmp_path.as_uri()}/metadata/{len(locations):05d}.metadata.json"
        locations.append(location)
        swap = PendingCommit("id", len(locations), location, f'{{"n": {len(locations)}}}')
        return CommitAttempt([swap], [LoadedTable(location, swap.metadata_json, {})])

    return locations, prepare


def files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "metadata").glob("*.json"))


def test_a_lost_race_is_prepared_again_and_its_file_deleted(tmp_path: Path) -> None:
    store = RacingStore(losses=2)
    locations, prepare = preparing(tmp_path)
    landed: list[CommitAttempt] = []

    async def on_landed(attempt: CommitAttempt) -> None:
        landed.append(attempt)

    results = asyncio.run(loop_of(store).run(target_of(tmp_path), prepare, on_landed))
    assert len(store.swaps) == 3, "two lost races, then the third attempt lands"
    assert [r.metadata_location for r in results] == [locations[2]]
    assert [a.results for a in landed] == [results]
    assert files(tmp_path) == ["00002.metadata.json"], "the losing attempts' files are deleted"


def test_a_commit_that_keeps_losing_is_a_commit_failure(tmp_path: Path) -> None:
    store = RacingStore(losses=10)
    _, prepare = preparing(tmp_path)
    with pytest.raises(CommitFailed, match=r"^Commit failed: ns.v kept changing; gave up after 2 attempts$"):
        asyncio.run(loop_of(store, retries=1).run(target_of(tmp_path), prepare))
    assert files(tmp_path) == []


def test_a_database_failure_during_the_swap_is_an_unknown_state_and_keeps_the_file(tmp_path: Path) -> None:
    lost = sa_exc.OperationalError("UPDATE", {}, ConnectionResetError("connection lost"))
    store = RacingStore(failure=lost)
    _, prepare = preparing(tmp_path)
    with pytest.raises(CommitStateUnknown, match="Commit state unknown"):
        asyncio.run(loop_of(store).run(target_of(tmp_path), prepare))
    assert len(store.swaps) == 1, "never retried: the swap may have landed"
    assert files(tmp_path) == ["00000.metadata.json"], "a file a landed swap may point at is kept"


def test_commits_to_one_object_take_turns_in_a_process(tmp_path: Path) -> None:
    """Two commits of one view in one process never race each other: the second prepares on the
    state the first left (no lost race, no retry)."""
    store = RacingStore()
    loop = loop_of(store)
    order: list[str] = []

    def prepare_named(name: str) -> Any:
        async def prepare() -> CommitAttempt:
            order.append(f"{name} prepares")
            await asyncio.sleep(0.01)
            location = f"{tmp_path.as_uri()}/metadata/{name}.metadata.json"
            swap = PendingCommit("id", 1, location, "{}")
            return CommitAttempt([swap], [LoadedTable(location, "{}", {})])

        return prepare

    async def both() -> None:
        async def landed(attempt: CommitAttempt) -> None:
            order.append(f"{str(attempt.results[0].metadata_location).rsplit('/', 1)[1][0]} lands")

        target = target_of(tmp_path)
        await asyncio.gather(
            loop.run(target, prepare_named("a"), landed), loop.run(target, prepare_named("b"), landed)
        )

    asyncio.run(both())
    assert order == ["a prepares", "a lands", "b prepares", "b lands"]


def test_an_unchanged_commit_swaps_nothing(tmp_path: Path) -> None:
    store = RacingStore()

    async def prepare() -> CommitAttempt:
        return CommitAttempt([], [LoadedTable("s3://b/current.metadata.json", "{}", {})])

    results = asyncio.run(loop_of(store).run(target_of(tmp_path), prepare))
    assert store.swaps == []
    assert [r.metadata_location for r in results] == ["s3://b/current.metadata.json"]


def test_a_guess_that_loses_is_prepared_again_on_a_read_without_counting_as_a_race(tmp_path: Path) -> None:
    store = RacingStore(losses=1)
    locations, fresh = preparing(tmp_path)
    calls = 0

    async def prepare() -> CommitAttempt:
        nonlocal calls
        calls += 1
        attempt: CommitAttempt = await fresh()
        attempt.guessed = calls == 1  # the first attempt is built on a remembered row
        return attempt

    # No retry allowed: the lost guess must not use up the only attempt.
    results = asyncio.run(loop_of(store, retries=0).run(target_of(tmp_path), prepare))
    assert len(store.swaps) == 2
    assert [r.metadata_location for r in results] == [locations[1]]
    assert files(tmp_path) == ["00001.metadata.json"], "the stale guess's file is deleted"
