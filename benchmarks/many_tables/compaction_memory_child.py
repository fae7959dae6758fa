"""The measured process of `benchmarks.many_tables.compaction_memory`, run by its path with the tree
measured on PYTHONPATH: builds one table of a busy table's small files, compacts it in process, prints
what it measured as JSON."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

TARGET_BYTES = 128 * 1024 * 1024


def child(files: int, rows: int, work: Path) -> dict[str, Any]:
    """Build the table (`files` appends of `rows` rows), compact it, report."""
    import datetime as dt
    import threading
    import types

    import psutil  # type: ignore[import-untyped]
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from catalog.pipelines import data_schema, parse_config
    from maintenance.inprocess import compact

    fields = [
        {"name": "id", "id": 1, "type": "long"},
        {"name": "name", "id": 2, "type": "string"},
        {"name": "score", "id": 3, "type": "double"},
        {"name": "at", "id": 4, "type": "timestamptz"},
        {"name": "sent_at", "id": 5, "type": "long"},
    ]
    document = {
        "source_clusters": [{"name": "c", "bootstrap_brokers": [{"hostname": "k", "port": 9092}]}],
        "tables": [
            {
                "source_cluster_name": "c",
                "source_topic": "t0000",
                "source_format": "json",
                "schema_mode": "inline",
                "schema": {"fields": fields},
            }
        ],
    }
    schema = data_schema(parse_config(document).tables[0])
    catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}/warehouse")
    catalog.create_namespace("n")
    table = catalog.create_table("n.t", schema)
    arrow = schema_to_pyarrow(schema)
    kafka = arrow.field("_kafka").type
    at = dt.datetime(2026, 11, 28, tzinfo=dt.UTC)
    for f in range(files):
        ids = pa.array(range(f * rows, (f + 1) * rows), pa.int64())
        names = pc.binary_join_element_wise(pa.scalar("user-"), pc.cast(ids, pa.string()), "")
        times = pa.array([at] * rows, pa.timestamp("us", "UTC"))
        record = pa.StructArray.from_arrays(
            [
                pa.array([f % 4] * rows, pa.int32()),
                ids,
                times,
                pa.nulls(rows, kafka.field("key").type),
                pa.array([[]] * rows, kafka.field("headers").type),
            ],
            fields=list(kafka),
        )
        columns = [ids, pc.cast(names, arrow.field("name").type), pc.divide(pc.cast(ids, pa.float64()), 4.0)]
        table.append(pa.Table.from_arrays([*columns, times, ids, record], schema=arrow))
    table = catalog.load_table("n.t")
    sizes = [task.file.file_size_in_bytes for task in table.scan().plan_files()]
    partition = types.SimpleNamespace(spec_id=0, values=(), small_bytes=sum(sizes))
    run = types.SimpleNamespace(partitions=(partition,))
    me = psutil.Process()
    before = me.memory_info().rss
    peak = [before]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    cpu, wall = time.process_time(), time.monotonic()
    outcome = compact(table, [run], TARGET_BYTES)  # type: ignore[list-item]
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    done.set()
    watcher.join()
    return {
        "files": len(sizes),
        "input_mib": round(sum(sizes) / 2**20, 1),
        "rows": files * rows,
        "rss_before_mib": round(before / 2**20),
        "rss_peak_mib": round(peak[0] / 2**20),
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "files_written": outcome["added_data_files_count"],
    }


if __name__ == "__main__":
    # Python put this script's folder first, where `maintenance.py` (a benchmark) would hide floe's
    # `maintenance` package.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    print(json.dumps(child(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))))
