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

from collections import OrderedDict

from cachetools import LRUCache
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

# A parsed model takes about six times its metadata JSON's bytes (measured: 13 KB of JSON, 81 KB of
# objects; 106 KB and 547 KB at 100 snapshots); the models kept take at most the capacity by that
# estimate (FLOE_METADATA_CACHE_MB). Ingestion of a thousand tables commits each of them in turn, so a
# capacity below their working set misses on every commit (an LRU under a cyclic scan): 256 MiB did
# once the tables reached floe's default of 100 snapshots, and every commit parsed its table's 100 KB
# of metadata again (5 ms each, half a second per transaction of a hundred tables).
MODEL_BYTES_PER_JSON_BYTE = 6
MAX_MODEL_BYTES = 1024 * 1024 * 1024
# The snapshots' JSON kept for `MetadataJson` (a snapshot is about 0.5-1 KB of JSON): a thousand tables
# of a hundred snapshots each take about 70 MiB.
MAX_SNAPSHOT_JSON_BYTES = 128 * 1024 * 1024
# Where a metadata document's snapshots go, as pydantic writes an empty list (a key, unescaped quotes:
# no property text can contain it).
_NO_SNAPSHOTS = '"snapshots":[]'


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

    def put(self, metadata_location: str, model: TableMetadata, json_bytes: int) -> None:
        """Keep `model`, whose JSON (`json_bytes` long) was written to `metadata_location` by a commit
        that landed."""
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
    """Metadata JSON as `model.model_dump_json()` writes it, with each snapshot's JSON made once.

    A table's metadata lists every snapshot it keeps (up to 100 by floe's default), and a commit writes
    the whole document again: serializing the snapshots (pyiceberg's summary serializer runs in Python)
    was 1.3 ms of a 100-snapshot table's commit, most of the catalog's CPU for ingestion's transactions
    of a hundred such tables. A snapshot never changes, and a commit's new model holds the very snapshot
    objects of the model it started from, so a snapshot's JSON is kept for that object (held here, so
    the identity stays valid) and reused; anything else is serialized as before. One per event loop."""

    def __init__(self, capacity_bytes: int = MAX_SNAPSHOT_JSON_BYTES) -> None:
        self._snapshots: LRUCache[int, tuple[Snapshot, str]] = LRUCache(
            capacity_bytes, getsizeof=lambda kept: len(kept[1])
        )

    def _snapshot(self, snapshot: Snapshot) -> str:
        kept = self._snapshots.get(id(snapshot))
        if kept is not None and kept[0] is snapshot:
            return kept[1]
        text = snapshot.model_dump_json()
        self._snapshots[id(snapshot)] = (snapshot, text)
        return text

    def dump(self, metadata: TableMetadata) -> str:
        """`metadata.model_dump_json()`, byte for byte."""
        if len(metadata.snapshots) < 2:
            return metadata.model_dump_json()
        rest = metadata.model_copy(update={"snapshots": []}).model_dump_json()
        at = rest.find(_NO_SNAPSHOTS)
        if at < 0:  # not pydantic's usual output: nothing to splice into
            return metadata.model_dump_json()
        snapshots = ",".join(self._snapshot(s) for s in metadata.snapshots)
        return f'{rest[:at]}"snapshots":[{snapshots}]{rest[at + len(_NO_SNAPSHOTS) :]}'
