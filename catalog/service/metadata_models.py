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

from pyiceberg.table.metadata import TableMetadata

# Tables a process commits to in turn; the least recently used go first.
MAX_MODELS = 128


class MetadataModels:
    """A bounded LRU of committed metadata models (one per event loop: no locking needed)."""

    def __init__(self, capacity: int = MAX_MODELS) -> None:
        self.capacity = capacity
        self._models: OrderedDict[str, TableMetadata] = OrderedDict()

    def get(self, metadata_location: str | None) -> TableMetadata | None:
        if metadata_location is None:
            return None
        model = self._models.get(metadata_location)
        if model is not None:
            self._models.move_to_end(metadata_location)
        return model

    def put(self, metadata_location: str, model: TableMetadata) -> None:
        """Keep `model`, whose JSON was written to `metadata_location` by a commit that landed."""
        self._models[metadata_location] = model
        self._models.move_to_end(metadata_location)
        while len(self._models) > self.capacity:
            self._models.popitem(last=False)
