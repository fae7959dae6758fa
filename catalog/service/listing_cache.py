"""Rendered listTables / listViews pages per (namespace, kind, page token, page size), shared by the
requests of one process and proved current by one indexed read per request.

Every create, drop, rename or register of a table or view bumps its namespace's `listing_version` in
the same transaction (`catalog.store.tabulars`). A request reads the namespace's (id, listing version)
with a read that started after it arrived (shared with the listings arriving meanwhile), and is served
the cached page only when the page was rendered for that very namespace row and version; so a table
created through any `floe serve` process is listed on the next call. The version is read before the
names: a page cached under version v holds at least every change counted up to v.

Entries hold only what every authorized caller gets alike (the names): authorization runs before the
cache is consulted.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec

from catalog.errors import NoSuchNamespace
from catalog.identifiers import Namespace
from catalog.service.shared_reads import SharedReads
from catalog.store.records import TabularKind, WarehouseRecord

# Per process, counted in the memory entries hold (`entry_cost`: a page of 1,000 names is ~45 KB, an
# empty page ~0.7 KB); the least recently used go first.
MAX_CACHED_BYTES = 32 * 1024 * 1024
MAX_ENTRY_BYTES = 4 * 1024 * 1024
# What an entry holds besides the strings of its key and namespace id and its body: the entry and
# `Listing` objects, the listing version, and the OrderedDict's slot and link with its table's spare room.
# Counting the response bytes alone (~41 B of an empty page) let the cache hold ~13 times its bound, at
# ~520 B of memory an entry. Checked with tracemalloc in tests/unit/test_listing_cache_memory.py.
ENTRY_FIXED_BYTES = 240

# warehouse id, namespace key, kind, page token ("" for the first page), page size (0: no paging)
ListingKey = tuple[str, str, str, str, int]


class _Page(msgspec.Struct, rename="kebab"):
    identifiers: list[dict[str, object]]
    next_page_token: str | None = None


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_Page).decode


@dataclass(frozen=True, slots=True)
class Listing:
    """One page of a namespace's tables or views as its `ListTablesResponse` JSON (only the bytes are
    kept: they are what the cache holds and the routes send)."""

    body: bytes

    @classmethod
    def render(cls, namespace: Namespace, names: Sequence[str], next_page_token: str | None) -> Listing:
        """The page as the spec's `ListTablesResponse` (`identifiers`, `next-page-token`), byte for byte
        what Litestar encodes for the route's response model."""
        # Encoded once for all identifiers: a page can hold thousands of names of one namespace.
        head = b'{"namespace":' + _encode(list(namespace.levels)) + b',"name":'
        identifiers = b",".join([head + _encode(name) + b"}" for name in names])
        body = b'{"identifiers":[' + identifiers + b'],"next-page-token":' + _encode(next_page_token) + b"}"
        return cls(body)

    @property
    def names(self) -> list[str]:
        """The table or view names of the page (decoded again: for the few callers outside the API)."""
        return [str(identifier["name"]) for identifier in _decode(self.body).identifiers]


def entry_cost(key: ListingKey, namespace_id: str, listing: Listing) -> int:
    """The bytes an entry keeps alive, counted as if it shared none of its objects (an upper bound)."""
    strings = sys.getsizeof(namespace_id) + sys.getsizeof(listing.body)
    return ENTRY_FIXED_BYTES + sys.getsizeof(key) + sum(map(sys.getsizeof, key)) + strings


@dataclass(frozen=True, slots=True)
class _Entry:
    namespace_id: str
    listing_version: int
    listing: Listing
    cost: int


class ListingCache:
    """A bounded LRU of rendered listing pages (one per event loop: no locking needed)."""

    def __init__(self, max_bytes: int = MAX_CACHED_BYTES) -> None:
        self._entries: OrderedDict[ListingKey, _Entry] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes

    def get(self, key: ListingKey, namespace_id: str, listing_version: int) -> Listing | None:
        """The page cached for `key` if it was listed from this namespace row at this version; a stale
        entry is dropped."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        # The id too: a namespace dropped and created again starts over at version 0.
        if entry.namespace_id != namespace_id or entry.listing_version != listing_version:
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return entry.listing

    def put(self, key: ListingKey, namespace_id: str, listing_version: int, listing: Listing) -> None:
        cost = entry_cost(key, namespace_id, listing)
        if cost > MAX_ENTRY_BYTES:
            return
        self._drop(key)
        self._entries[key] = _Entry(namespace_id, listing_version, listing, cost)
        self._bytes += cost
        while self._bytes > self._max_bytes and self._entries:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: ListingKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.cost

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def accounted_bytes(self) -> int:
        """The memory the entries hold, as counted against the bound."""
        return self._bytes


class ListingStore(Protocol):
    """What listings read: a namespace's (id, listing version), and a page of its names."""

    async def get_listing_version(self, warehouse_id: str, key: str) -> tuple[str, int] | None: ...

    async def list_tabulars(
        self, namespace_id: str, kind: TabularKind, page_token: str | None, page_size: int | None
    ) -> tuple[list[str], str | None]: ...


class Listings:
    """listTables/listViews pages (the caller has authorized the read): the cached page when the
    namespace's listing version says it is current, else listed and cached. The version is read before
    the names, so a cached page is never older than its version."""

    def __init__(self, store: ListingStore, cache: ListingCache | None = None) -> None:
        self.store = store
        self.cache = cache if cache is not None else ListingCache()
        # The (id, listing version) of namespaces, one database read shared by concurrent listings.
        self.versions: SharedReads[tuple[str, str], tuple[str, int] | None] = SharedReads(
            lambda key: store.get_listing_version(*key)
        )

    async def page(
        self,
        warehouse: WarehouseRecord,
        namespace: Namespace,
        kind: TabularKind,
        page_token: str | None,
        page_size: int | None,
    ) -> Listing:
        found = await self.versions.read((warehouse.id, namespace.key))
        if found is None:
            raise NoSuchNamespace(f"Namespace does not exist: {namespace}")
        namespace_id, listing_version = found
        key = (warehouse.id, namespace.key, kind, page_token or "", page_size or 0)
        cached = self.cache.get(key, namespace_id, listing_version)
        if cached is not None:
            return cached
        names, next_token = await self.store.list_tabulars(namespace_id, kind, page_token, page_size)
        listing = Listing.render(namespace, names, next_token)
        self.cache.put(key, namespace_id, listing_version, listing)
        return listing
