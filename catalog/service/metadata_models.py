"""Table metadata models this process committed, by the metadata location they were written to.

A commit parses the table's stored metadata JSON into pyiceberg's model before it applies the updates:
for a table committed to again and again (an ingestion pipeline's micro-batches, a maintenance pass)
that parse was about a third of the commit's CPU. The model a commit wrote is exactly what its
metadata JSON parses to, and a metadata location names one file forever (a new version is a new
file), so the next commit by this process starts from the model kept here when the table's current
location is the one it wrote; any other location (a commit by another process) is parsed as before.
pyiceberg chains its own updates the same way: `update_table_metadata` results feed the next update.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pyiceberg.table.metadata import TableMetadata

# A parsed model takes about six times its metadata JSON's bytes (measured: 13 KB of JSON, 81 KB of
# objects; 106 KB and 547 KB at 100 snapshots); the models kept take at most the capacity by that
# estimate (FLOE_METADATA_CACHE_MB). Ingestion of a thousand tables commits each of them in turn, so a
# capacity below their working set misses on every commit (an LRU under a cyclic scan): 256 MiB did
# once the tables reached floe's default of 100 snapshots, and every commit parsed its table's 100 KB
# of metadata again (5 ms each, half a second per transaction of a hundred tables).
MODEL_BYTES_PER_JSON_BYTE = 6
MAX_MODEL_BYTES = 1024 * 1024 * 1024
# The JSON of the snapshots and log entries kept for `MetadataJson` (a snapshot of the shared consumer is
# about 0.8 KB of JSON, a log entry 60-210 bytes): a thousand tables of 155 snapshots each took 153 MiB.
MAX_ITEM_JSON_BYTES = 256 * 1024 * 1024
# The lists spliced in, and where each goes as pydantic writes it empty (a key, unescaped quotes: no
# property text can contain it).
_SPLICED = (
    ("snapshots", '"snapshots":[]'),
    ("snapshot_log", '"snapshot-log":[]'),
    ("metadata_log", '"metadata-log":[]'),
)


def splice_skeleton(metadata: TableMetadata) -> tuple[str, list[tuple[int, str, str]]] | None:
    """`metadata`'s JSON with its spliced lists empty, and where each list goes in it ((offset, field,
    the empty list's text), in order); None when there is nothing worth splicing (fewer than two
    snapshots) or pydantic's output is not the usual one."""
    if len(metadata.snapshots) < 2:
        return None
    rest = metadata.model_copy(update={field: [] for field, _ in _SPLICED}).model_dump_json()
    places = sorted((rest.find(empty), field, empty) for field, empty in _SPLICED)
    if places[0][0] < 0:  # not pydantic's usual output: nothing to splice into
        return None
    return rest, places


class MetadataModels:
    """An LRU of committed metadata models bounded by their estimated size (one per event loop: no
    locking needed)."""

    def __init__(self, capacity_bytes: int = MAX_MODEL_BYTES) -> None:
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self._models: OrderedDict[str, tuple[TableMetadata, int]] = OrderedDict()
        self._json = MetadataJson()

    def dump(self, model: TableMetadata) -> str:
        """A commit's new model as its metadata JSON (`MetadataJson`: the snapshots it shares with the
        model it started from are not serialized again)."""
        return self._json.dump(model)

    def __len__(self) -> int:
        return len(self._models)

    def get(self, metadata_location: str | None) -> TableMetadata | None:
        if metadata_location is None:
            return None
        found = self._models.get(metadata_location)
        if found is None:
            return None
        self._models.move_to_end(metadata_location)
        return found[0]

    def put(
        self, metadata_location: str, model: TableMetadata, json_bytes: int, replaces: str | None = None
    ) -> None:
        """Keep `model`, whose JSON (`json_bytes` long) was written to `metadata_location` by a commit
        that landed on the version at `replaces`, which is dropped: no commit starts from it again.
        Kept, it was as recent as the new version (the commit had just read it), so under ingestion's
        round of every table the cache held two versions of each and missed from half its capacity."""
        if replaces is not None:
            replaced = self._models.pop(replaces, None)
            if replaced is not None:
                self.size_bytes -= replaced[1]
        size = json_bytes * MODEL_BYTES_PER_JSON_BYTE
        if size > self.capacity_bytes:
            return
        previous = self._models.pop(metadata_location, None)
        if previous is not None:
            self.size_bytes -= previous[1]
        self._models[metadata_location] = (model, size)
        self.size_bytes += size
        while self.size_bytes > self.capacity_bytes:
            _, (_, dropped) = self._models.popitem(last=False)
            self.size_bytes -= dropped


class MetadataJson:
    """Metadata JSON as `model.model_dump_json()` writes it, with each snapshot's and log entry's JSON
    made once.

    A table's metadata lists every snapshot it keeps (up to 100 by floe's default) and as many entries
    in its snapshot log and metadata log, and a commit writes the whole document again: serializing the
    snapshots (pyiceberg's summary serializer runs in Python) was 1.3 ms of a 100-snapshot table's
    commit, and the logs most of the rest. A snapshot or log entry never changes, and a commit's new
    model holds the very objects of the model it started from, so each one's JSON is kept for that
    object (held here, so the identity stays valid) and reused; anything else is serialized as before.

    A commit usually keeps a list's items in order, drops a few from its front (the oldest log entries,
    expired snapshots) and appends its own: that run is recognized by identity in C (`_kept_run`), so a
    dump touches only the items it adds, not every item in Python (that loop was 14 % of the catalog's
    py-spy samples under 100-table transactions at ~115 snapshots a table). Any other change falls back
    to looking each item up.

    Kept per table (its location), for the items of its last document only: an item the table no
    longer lists (an expired snapshot, a log entry trimmed) goes with the next dump. A single dict of
    every item ever dumped, emptied when full, had filled with such items at ~1 KB per commit: at 1,000
    tables it emptied every round once they passed ~120 snapshots, and every commit then serialized its
    whole document again. Tables are dropped least recently dumped first past the capacity. One per
    event loop."""

    def __init__(self, capacity_bytes: int = MAX_ITEM_JSON_BYTES) -> None:
        self.capacity_bytes = capacity_bytes
        self.size_bytes = 0
        self.serialized = 0  # items serialized (not reused), for tests and profiling
        # table location -> (per spliced field: its items and their JSON, in order; the JSON's bytes)
        self._tables: OrderedDict[str, tuple[dict[str, _Items], int]] = OrderedDict()

    def items_of(self, location: str) -> int:
        """How many items' JSON is kept for the table at `location`."""
        kept = self._tables.get(location)
        return sum(len(items.items) for items in kept[0].values()) if kept is not None else 0

    def dump(self, metadata: TableMetadata) -> str:
        """`metadata.model_dump_json()`, byte for byte."""
        skeleton = splice_skeleton(metadata)
        if skeleton is None:
            return metadata.model_dump_json()
        rest, places = skeleton
        previous = self._tables.pop(metadata.location, None)
        before: dict[str, _Items] = {}
        if previous is not None:
            before = previous[0]
            self.size_bytes -= previous[1]
        now: dict[str, _Items] = {}
        size = 0
        parts: list[str] = []
        done = 0
        for at, field, empty in places:
            items = self._texts(list(getattr(metadata, field)), before.get(field))
            now[field] = items
            size += items.size
            parts += [rest[done:at], empty[:-1], ",".join(items.texts), "]"]
            done = at + len(empty)
        parts.append(rest[done:])
        self._tables[metadata.location] = (now, size)
        self.size_bytes += size
        while self.size_bytes > self.capacity_bytes and len(self._tables) > 1:
            _, (_, dropped) = self._tables.popitem(last=False)
            self.size_bytes -= dropped
        return "".join(parts)

    def _texts(self, items: list[Any], before: _Items | None) -> _Items:
        """`items` with their JSON: the run kept from `before` reused as it is, the rest looked up or
        serialized."""
        if before is not None:
            run = _kept_run(items, before.items)
            if run is not None:
                start, length = run
                added = self._serialize(items[length:])
                dropped = sum(map(len, before.texts[:start]))
                size = before.size - dropped + sum(map(len, added))
                return _Items(items, before.texts[start : start + length] + added, size)
            pairs = zip(before.items, before.texts, strict=True)
            known = dict(zip(map(id, before.items), pairs, strict=True))
        else:
            known = {}
        texts = []
        for item in items:
            kept = known.get(id(item))
            if kept is not None and kept[0] is item:
                texts.append(kept[1])
            else:
                texts.extend(self._serialize([item]))
        return _Items(items, texts, sum(map(len, texts)))

    def _serialize(self, items: list[Any]) -> list[str]:
        self.serialized += len(items)
        return [item.model_dump_json() for item in items]


# How far into the previous list a new list's first item is looked for: the entries a commit trims
# from a list's front (the metadata log's oldest, snapshots expired in order) are a few at most.
_TRIMMED_AT_MOST = 16


@dataclass(frozen=True)
class _Items:
    """One list of a table's last document: its items and their JSON, in order."""

    items: list[Any]
    texts: list[str]
    size: int  # the texts' length in all


def _kept_run(items: list[Any], before: list[Any]) -> tuple[int, int] | None:
    """(start, length) when `items` begins with the very objects `before[start:]` (length of them), the
    previous list with its first `start` items dropped; None otherwise. Compared by identity in C."""
    if not before:
        return 0, 0
    if not items:
        return None
    first = items[0]
    start = next((i for i, item in enumerate(before[:_TRIMMED_AT_MOST]) if item is first), None)
    if start is None:
        return None
    length = len(before) - start
    if len(items) < length or not all(map(operator.is_, items[:length], before[start:])):
        return None
    return start, length
