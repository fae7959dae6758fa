"""`python -m benchmarks.many_tables.metadata_json_cycle`: the catalog's metadata JSON writer
(`MetadataJson`) when many tables commit in turn, the previous designs and the current one in one run.

Ingestion of 1,000 tables commits each of them in turn, and every commit writes the table's whole
metadata document. `MetadataJson` keeps each snapshot's and log entry's JSON so that a commit serializes
only its new items. Before, it kept every item it had ever serialized in one dict and emptied it when
full (128 MiB): the items a table no longer lists (log entries trimmed, snapshots expired) stayed until
then, about 1 KB a commit. Then it kept the items of each table's last document only, and dropped whole
tables, least recently dumped first, past its capacity (256 MiB), looking each item up in Python at every
dump. Now it also finds the run of items a dump keeps from the last (the previous list, a few dropped from
its front) by identity in C, and touches only the items it adds.

Each design: `--tables` tables of `--snapshots` snapshots each (one table built by the catalog's commit
core with the shared consumer's summaries, then parsed again per table so each has its own objects);
a first round dumps every table once (nothing kept yet), then `--rounds` rounds append one snapshot to
every table in turn and dump it. Measured: CPU time of the dumps alone, per table, and items serialized
per dump.

Then the parsed-model cache (`MetadataModels`, 1 GiB by default) under the same round: 1,000 tables, each
commit reading its table's model and keeping the new one, for several document sizes; before, the new
version was kept beside the one it replaced (which the commit had just read, so both were recent); now it
replaces it. Measured: the share of commits that found their model (the rest parse the stored JSON).
Results: benchmarks/results/many-tables-metadata-json-cycle.{md,json}.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from collections import OrderedDict
from typing import Any, Protocol, cast

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import IcebergBaseModel

from benchmarks.many_tables.__main__ import RESULTS, git_commit
from benchmarks.many_tables.metadata_growth import LOCATION, append, empty_table
from catalog.commit import parse_table_metadata
from catalog.service.metadata_models import (
    _SPLICED,
    MAX_ITEM_JSON_BYTES,
    MetadataJson,
    MetadataModels,
    splice_skeleton,
)


class Dumper(Protocol):
    serialized: int

    def dump(self, metadata: TableMetadata) -> str: ...


class PreviousMetadataJson:
    """The design before (ebe45de's `MetadataJson`), kept here to measure against: one dict of every
    item serialized, emptied when full."""

    def __init__(self, capacity_bytes: int = 128 * 1024 * 1024) -> None:
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self.serialized = 0
        self._items: dict[int, tuple[object, str]] = {}

    def _item(self, item: IcebergBaseModel) -> str:
        kept = self._items.get(id(item))
        if kept is not None and kept[0] is item:
            return kept[1]
        text = item.model_dump_json()
        self.serialized += 1
        if self.size_bytes + len(text) > self.capacity_bytes:
            self._items.clear()
            self.size_bytes = 0
        self._items[id(item)] = (item, text)
        self.size_bytes += len(text)
        return text

    def dump(self, metadata: TableMetadata) -> str:
        rest = metadata.model_copy(update={field: [] for field, _ in _SPLICED}).model_dump_json()
        places = sorted((rest.find(empty), field, empty) for field, empty in _SPLICED)
        parts: list[str] = []
        done = 0
        for at, field, empty in places:
            items = ",".join([self._item(item) for item in getattr(metadata, field)])
            parts += [rest[done:at], empty[:-1], items, "]"]
            done = at + len(empty)
        parts.append(rest[done:])
        return "".join(parts)


class PerItemMetadataJson:
    """The design before (eec8199's `MetadataJson`), kept here to measure against: per table, each item's
    JSON by the item's identity, looked up item by item in Python at every dump."""

    def __init__(self, capacity_bytes: int = MAX_ITEM_JSON_BYTES) -> None:
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self.serialized = 0  # items serialized (not reused), for tests and profiling
        # table location -> (id(item) -> (item, its JSON), the JSON's bytes)
        self._tables: OrderedDict[str, tuple[dict[int, tuple[object, str]], int]] = OrderedDict()

    def items_of(self, location: str) -> int:
        """How many items' JSON is kept for the table at `location`."""
        kept = self._tables.get(location)
        return len(kept[0]) if kept is not None else 0

    def dump(self, metadata: TableMetadata) -> str:
        """`metadata.model_dump_json()`, byte for byte."""
        skeleton = splice_skeleton(metadata)
        if skeleton is None:
            return metadata.model_dump_json()
        rest, places = skeleton
        previous = self._tables.pop(metadata.location, None)
        before: dict[int, tuple[object, str]] = {}
        if previous is not None:
            before = previous[0]
            self.size_bytes -= previous[1]
        now: dict[int, tuple[object, str]] = {}
        size = 0
        parts: list[str] = []
        done = 0
        for at, field, empty in places:
            texts = []
            for item in getattr(metadata, field):
                kept = before.get(id(item))
                if kept is not None and kept[0] is item:
                    text = kept[1]
                else:
                    text = item.model_dump_json()
                    self.serialized += 1
                now[id(item)] = (item, text)
                size += len(text)
                texts.append(text)
            parts += [rest[done:at], empty[:-1], ",".join(texts), "]"]
            done = at + len(empty)
        parts.append(rest[done:])
        self._tables[metadata.location] = (now, size)
        self.size_bytes += size
        while self.size_bytes > self.capacity_bytes and len(self._tables) > 1:
            _, (_, dropped) = self._tables.popitem(last=False)
            self.size_bytes -= dropped
        return "".join(parts)


DESIGNS: dict[str, type[Any]] = {
    "one dict, emptied when full (ebe45de)": PreviousMetadataJson,
    "per table, its current items, looked up one by one (eec8199)": PerItemMetadataJson,
    "per table, the run kept from the last dump found by identity (now)": MetadataJson,
}


def tables(count: int, snapshots: int) -> list[TableMetadata]:
    base = empty_table()
    for sequence in range(1, snapshots + 1):
        base = append(base, sequence)
    text = base.model_dump_json()
    return [parse_table_metadata(text.replace(LOCATION, f"{LOCATION}{i:05d}")) for i in range(count)]


def item_kib(model: TableMetadata) -> float:
    """The JSON of a table's snapshots and log entries (what `MetadataJson` keeps for it)."""
    texts = [i.model_dump_json() for field, _ in _SPLICED for i in getattr(model, field)]
    return round(sum(map(len, texts)) / 1024, 1)


def run(design: str, args: argparse.Namespace) -> dict[str, Any]:
    models = tables(args.tables, args.snapshots)
    kib = item_kib(models[0])
    dumper: Dumper = DESIGNS[design]()
    for model in models:  # the first round: nothing kept yet
        dumper.dump(model)
    cpu = 0.0
    serialized = dumper.serialized
    for round_ in range(args.rounds):
        for i, model in enumerate(models):
            model = models[i] = append(model, args.snapshots + round_ + 1)
            began = time.process_time()
            text = dumper.dump(model)
            cpu += time.process_time() - began
            if round_ == 0 and i == 0:
                assert text == model.model_dump_json()
    dumps = args.rounds * args.tables
    row = {
        "design": design,
        "tables": args.tables,
        "snapshots": args.snapshots,
        "item_json_kib_per_table": kib,
        "dump_ms": round(cpu / dumps * 1000, 3),
        "items_serialized_per_dump": round((dumper.serialized - serialized) / dumps, 1),
        "hundred_table_transaction_ms": round(cpu / dumps * 100 * 1000, 1),
    }
    del models, dumper
    gc.collect()
    return row


def model_hits(json_bytes: int, tables: int, replacing: bool, rounds: int = 3) -> float:
    """The share of commits finding their model over `rounds` rounds of every table in turn (after a
    first round that fills the cache), with the default budget."""
    models = MetadataModels()
    placeholder = cast(TableMetadata, object())  # the cache looks at identity and the size given
    for t in range(tables):
        models.put(f"t{t}/v0", placeholder, json_bytes)
    found = 0
    for version in range(1, rounds + 1):
        for t in range(tables):
            base = f"t{t}/v{version - 1}"
            found += models.get(base) is not None
            models.put(f"t{t}/v{version}", placeholder, json_bytes, replaces=base if replacing else None)
    return round(found / (rounds * tables), 3)


def model_rows(tables: int) -> list[dict[str, Any]]:
    sizes: dict[int, int] = {}
    model = empty_table()
    for sequence in range(1, 241):
        model = append(model, sequence)
        if sequence % 20 == 0:
            sizes[sequence] = len(model.model_dump_json())
    return [
        {
            "snapshots": snapshots,
            "json_kib": round(json_bytes / 1024, 1),
            "hits_before": model_hits(json_bytes, tables, replacing=False),
            "hits_now": model_hits(json_bytes, tables, replacing=True),
        }
        for snapshots, json_bytes in sizes.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    # 200 of these snapshots are about the item JSON of 155 of the shared consumer's (153 KB measured).
    parser.add_argument("--snapshots", type=int, default=200, help="snapshots per table to start with")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds over every table")
    args = parser.parse_args()
    started = time.time()
    rows = []
    for design in DESIGNS:
        print(f"== {design}", flush=True)
        rows.append(run(design, args))
        print(f"   {rows[-1]}", flush=True)
    models = model_rows(args.tables)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "many-tables-metadata-json-cycle"
    (RESULTS / f"{name}.json").write_text(json.dumps({"dumps": rows, "models": models}, indent=2) + "\n")
    lines = [
        "# The catalog's metadata JSON writer when 1,000 tables commit in turn",
        "",
        f"Generated by `python -m benchmarks.many_tables.metadata_json_cycle --tables {args.tables} "
        f"--snapshots {args.snapshots} --rounds {args.rounds}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} at git commit `{git_commit()}` "
        f"({time.time() - started:.0f} s). {(__doc__ or '').split(chr(10) + chr(10))[1]}",
        "",
        (__doc__ or "").split(chr(10) + chr(10))[2],
        "",
        "| design | tables | snapshots | item JSON per table | CPU per dump | items serialized per dump "
        "| a 100-table transaction's dumps |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['design']} | {row['tables']:,} | {row['snapshots']}+ "
            f"| {row['item_json_kib_per_table']} KiB | {row['dump_ms']} ms "
            f"| {row['items_serialized_per_dump']} | {row['hundred_table_transaction_ms']} ms |"
        )
    lines += [
        "",
        (__doc__ or "").split(chr(10) + chr(10))[3],
        "",
        f"| snapshots | metadata JSON per table | commits finding their model, before | now ({args.tables:,} "
        "tables, 1 GiB) |",
        "|---:|---:|---:|---:|",
    ]
    for row in models:
        lines.append(
            f"| {row['snapshots']} | {row['json_kib']} KiB | {row['hits_before']:.1%} "
            f"| {row['hits_now']:.1%} |"
        )
    lines += ["", f"Machine: {os.cpu_count()} CPUs; load average at the end {os.getloadavg()}."]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
