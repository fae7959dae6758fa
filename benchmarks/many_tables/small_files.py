"""`python -m benchmarks.many_tables.small_files`: writing a quiet table's small Parquet file, with the
table's codec and dictionaries (before) and plain (now: `ingest.shared.pyiceberg_write.PLAIN_MAX_BYTES`).

At a thousand quiet tables the shared consumer writes a thousand data files of a few records a round,
and a py-spy of `python -m benchmarks.many_tables` put a fifth of its loop in pyarrow's Parquet writer.
This runs `DataFileWriter.write` (a file on a local warehouse, its statistics, its `DataFile`) for
batches of 1 to 1,000 records of the benchmark tables' schema plus a short string column, both designs
in one run, alternating which goes first, and reports the calling thread's CPU time per file (the
median of `--rounds` rounds) and the file's size. The previous design is `DataFileWriter` with the
plain threshold at -1 (every file written with the table's settings, as before).

Results: benchmarks/results/many-tables-small-files.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
from pyiceberg.io.pyarrow import PyArrowFileIO, schema_to_pyarrow
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField, StringType

from benchmarks.many_tables.__main__ import RESULTS, git_commit, write_markdown
from catalog.pipelines.columns import KAFKA_STRUCT
from ingest.shared import pyiceberg_write

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "sent_at", LongType(), required=False),
    NestedField(3, "name", StringType(), required=False),
    NestedField(4, "_kafka", KAFKA_STRUCT, required=False),
)
DESIGNS = {"table's codec (zstd) and dictionaries, every file (before)": -1, "plain when small (now)": None}


@dataclass
class Measured:
    design: str
    records: int
    arrow_bytes: int
    cpu_us: float
    file_bytes: int
    codec: str


def rows(count: int, arrow: pa.Schema) -> pa.Table:
    now_ms = int(time.time() * 1000)
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "sent_at": now_ms + i,
                "name": f"n{i % 7}",
                "_kafka": {"partition": 0, "offset": i, "timestamp": now_ms + i, "key": None, "headers": []},
            }
            for i in range(count)
        ],
        schema=arrow,
    )


def measure(writer: pyiceberg_write.DataFileWriter, batch: pa.Table, files: int) -> tuple[float, int, str]:
    """CPU microseconds a file, and the last file's size and first column's codec."""
    import pyarrow.parquet as pq

    began = time.thread_time()
    for _ in range(files):
        [written] = writer.write(batch)
    took = (time.thread_time() - began) / files * 1e6
    codec = pq.ParquetFile(written.file_path).metadata.row_group(0).column(0).compression
    return took, written.file_size_in_bytes, str(codec)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--files", type=int, default=100, help="files a round and design")
    args = parser.parse_args()
    found: dict[tuple[str, int], list[tuple[float, int, str]]] = {}
    arrow_bytes: dict[int, int] = {}  # a batch's Arrow data, by records
    with tempfile.TemporaryDirectory(prefix="floe-small-files-") as folder:
        metadata = new_table_metadata(
            SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, str(Path(folder) / "t"), {}
        )
        arrow = schema_to_pyarrow(metadata.schema(), include_field_ids=True)
        writer = pyiceberg_write.DataFileWriter(metadata, PyArrowFileIO())
        current = pyiceberg_write.PLAIN_MAX_BYTES
        for count in (1, 10, 30, 100, 1000):
            batch = rows(count, arrow)
            arrow_bytes[count] = batch.nbytes
            names = list(DESIGNS)
            for index in range(args.rounds):
                for name in names if index % 2 == 0 else reversed(names):
                    threshold = DESIGNS[name]
                    pyiceberg_write.PLAIN_MAX_BYTES = current if threshold is None else threshold
                    found.setdefault((name, count), []).append(measure(writer, batch, args.files))
            pyiceberg_write.PLAIN_MAX_BYTES = current
    results = [
        Measured(
            name,
            count,
            arrow_bytes[count],
            round(statistics.median(t for t, _, _ in rounds), 1),
            rounds[-1][1],
            rounds[-1][2],
        )
        for (name, count), rounds in found.items()
    ]
    report(results, args)


def report(results: list[Measured], args: argparse.Namespace) -> None:
    name = "many-tables-small-files"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    by: dict[int, dict[str, Measured]] = {}
    for r in results:
        by.setdefault(r.records, {})[r.design] = r
    before, now = list(DESIGNS)
    lines = [
        "# Many tables: a quiet table's small Parquet file, with the table's codec and dictionaries or plain",
        "",
        f"Generated by `python -m benchmarks.many_tables.small_files` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}`: "
        f"`DataFileWriter.write` of one batch to a local warehouse, {args.files} files a round and design, "
        f"{args.rounds} rounds alternating which design goes first; CPU time of the calling thread per file, "
        f"the median round. Plain: at most {pyiceberg_write.PLAIN_MAX_BYTES:,} bytes of Arrow data.",
        "",
        "| records | Arrow bytes | before: CPU a file | before: file "
        "| now: CPU a file | now: file | now: codec |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for records, pair in sorted(by.items()):
        b, n = pair[before], pair[now]
        lines.append(
            f"| {records:,} | {n.arrow_bytes:,} | {b.cpu_us:.0f} us | {b.file_bytes:,} B | {n.cpu_us:.0f} us "
            f"| {n.file_bytes:,} B | {n.codec} |"
        )
    write_markdown(name, lines)


if __name__ == "__main__":
    main()
