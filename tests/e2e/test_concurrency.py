"""Many pyiceberg writers appending to one table at once: every append lands exactly once.

Each writer retries a commit that lost the race (409 `CommitFailedException`) the way engines do:
refresh the table and append again on the new base. The catalog must never lose or duplicate a commit.

pyiceberg deep-copies the table metadata many times per append, so the writers load tables with
`snapshot-loading-mode=refs` (only the referenced snapshots) to keep the client's CPU cost per attempt
flat as history grows; the final check loads everything.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException

from devtools.catalog_server import CatalogProcess

WRITERS = 16
APPENDS_PER_WRITER = 25
ROWS_PER_APPEND = 2
# Full-jitter exponential backoff after a lost race: keeps only a few writers in flight at a time, so
# most attempts are not wasted (16 writers sharing one GIL and a busy 2-core machine).
BACKOFF_BASE_SECONDS = 0.2
BACKOFF_CAP_SECONDS = 6.0
SCHEMA = pa.schema([pa.field("writer", pa.int32()), pa.field("seq", pa.int32()), pa.field("row", pa.int32())])


def batch(writer: int, seq: int) -> pa.Table:
    return pa.table(
        {
            "writer": pa.array([writer] * ROWS_PER_APPEND, pa.int32()),
            "seq": pa.array([seq] * ROWS_PER_APPEND, pa.int32()),
            "row": pa.array(range(ROWS_PER_APPEND), pa.int32()),
        },
        schema=SCHEMA,
    )


def test_concurrent_appends_all_land_once(catalog_server: CatalogProcess, namespace: str) -> None:
    identifier = f"{namespace}.contended"
    # No retries inside pyiceberg: the writers below retry themselves, refreshing and appending again.
    catalog_server.catalog().create_table(
        identifier, schema=SCHEMA, properties={"commit.retry.num-retries": "0"}
    )
    barrier = threading.Barrier(WRITERS)
    conflicts = Counter[int]()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(writer_id: int) -> None:
        try:
            catalog = catalog_server.catalog(**{"snapshot-loading-mode": "refs"})
            table = catalog.load_table(identifier)
            rng = random.Random(writer_id)
            barrier.wait()
            for seq in range(APPENDS_PER_WRITER):
                data = batch(writer_id, seq)
                attempt = 0
                while True:
                    try:
                        table.append(data)
                        # The commit response carries the full history: reload the lean view.
                        table = table.refresh()
                        break
                    except CommitFailedException:
                        attempt += 1
                        with lock:
                            conflicts[writer_id] += 1
                        assert attempt < 500, "a writer never got its append in"
                        backoff = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** min(attempt, 10))
                        time.sleep(rng.uniform(0, backoff))
                        table = table.refresh()
        except BaseException as exc:
            with lock:
                errors.append(exc)
            raise

    threads = [threading.Thread(target=writer, args=(i,), name=f"writer-{i}") for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors

    table = catalog_server.catalog().load_table(identifier)
    snapshots = table.metadata.snapshots
    assert len(snapshots) == WRITERS * APPENDS_PER_WRITER
    assert len({s.snapshot_id for s in snapshots}) == len(snapshots)
    # The snapshots form one linear history: each one's parent is the one committed before it.
    by_sequence = sorted(snapshots, key=lambda s: s.sequence_number or 0)
    assert [s.sequence_number for s in by_sequence] == list(range(1, len(snapshots) + 1))
    for parent, child in itertools.pairwise(by_sequence):
        assert child.parent_snapshot_id == parent.snapshot_id
    assert table.metadata.current_snapshot_id == by_sequence[-1].snapshot_id

    rows = table.scan().to_arrow()
    assert rows.num_rows == WRITERS * APPENDS_PER_WRITER * ROWS_PER_APPEND
    seen = Counter(
        zip(rows["writer"].to_pylist(), rows["seq"].to_pylist(), rows["row"].to_pylist(), strict=True)
    )
    expected = {
        (w, s, r) for w in range(WRITERS) for s in range(APPENDS_PER_WRITER) for r in range(ROWS_PER_APPEND)
    }
    assert set(seen) == expected
    assert set(seen.values()) == {1}, "no row may be appended twice"
    assert sum(conflicts.values()) > 0, "the writers were expected to actually contend"
