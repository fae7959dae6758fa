"""Rendered loadTable responses per (table, metadata version), shared by the requests of one process.

An entry is keyed by the table's name, the `snapshots` mode and the S3 endpoint the engine is told
(`X-Floe-Storage-Endpoint`: the config differs) and holds the metadata location it was
rendered for: a hit still costs the caller one indexed read of the table's current metadata location
(the version check), so a commit made by any process, through any worker, is seen by the next load.
Entries hold only what every authorized caller gets alike (metadata, warehouse client config, ETag):
authorization runs before the cache is consulted, and vended storage credentials are added per caller
after it, never stored.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from catalog.service.table_model import LoadedTable

# Per process: a few thousand tables' metadata at most; the least recently used go first.
MAX_CACHED_BYTES = 64 * 1024 * 1024
MAX_ENTRY_BYTES = 4 * 1024 * 1024

CacheKey = tuple[str, str, str, str, str]  # warehouse id, namespace key, table, snapshots, endpoint


@dataclass(frozen=True, slots=True)
class CachedLoad:
    """A rendered response and what it depends on besides the metadata location."""

    loaded: LoadedTable
    warehouse_properties: Mapping[str, str]

    @property
    def size(self) -> int:
        return len(self.loaded.to_json())


class LoadCache:
    """A bounded LRU of rendered `LoadedTable`s (one per event loop: no locking needed)."""

    def __init__(self, max_bytes: int = MAX_CACHED_BYTES) -> None:
        self._entries: OrderedDict[CacheKey, CachedLoad] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes

    def get(
        self, key: CacheKey, metadata_location: str | None, warehouse_properties: Mapping[str, str]
    ) -> LoadedTable | None:
        """The cached response for `key` if it was rendered for `metadata_location` and the warehouse's
        current settings; a stale entry is dropped."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if (
            entry.loaded.metadata_location != metadata_location
            or entry.warehouse_properties != warehouse_properties
        ):
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry.loaded

    def has(self, key: CacheKey) -> bool:
        return key in self._entries

    def put(self, key: CacheKey, loaded: LoadedTable, warehouse_properties: Mapping[str, str]) -> None:
        if loaded.storage_credentials:  # secrets of one caller: never shared
            return
        entry = CachedLoad(loaded.rendered(), warehouse_properties)
        size = entry.size
        if size > MAX_ENTRY_BYTES:
            return
        self._drop(key)
        self._entries[key] = entry
        self._bytes += size
        while self._bytes > self._max_bytes and self._entries:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: CacheKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size

    def __len__(self) -> int:
        return len(self._entries)
