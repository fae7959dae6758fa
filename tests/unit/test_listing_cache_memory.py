"""The listing cache's bound holds for the memory it really holds, not only the response bytes (issue 30,
item 6: counting ~41 B of an empty page against the bound, while an entry costs ~520 B, let a process
grow ~13 times past it, ~52 MB per 100,000 pages of varied `pageSize`)."""

from __future__ import annotations

import gc
import tracemalloc
import uuid

import pytest

from catalog.identifiers import Namespace
from catalog.service.listing_cache import Listing as Page
from catalog.service.listing_cache import ListingCache, ListingKey, entry_cost


def _entry(i: int, names: int) -> tuple[ListingKey, str, Page]:
    """An entry whose objects are all its own (nothing interned or shared with other entries), as when
    each comes from another request: the worst case for the accounting."""
    namespace = Namespace((f"analytics_{i % 7}",))
    key: ListingKey = (str(uuid.uuid4()), namespace.key + "", "table" + str(i)[:0], "", 1000 + i)
    page = Page.render(namespace, [f"table_{i}_{n}" for n in range(names)], None)
    return key, str(uuid.uuid4()), page


def _traced_growth(cache: ListingCache, count: int, names: int) -> int:
    """Memory the cache holds more after `count` puts of new entries (made while traced: what the cache
    keeps of them is counted, what it drops is freed)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            key, namespace_id, page = _entry(i, names)
            cache.put(key, namespace_id, 0, page)
        del key, namespace_id, page
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("names", [0, 3, 100])
def test_the_accounted_size_covers_what_the_entries_hold(names: int) -> None:
    cache = ListingCache(max_bytes=1 << 40)
    count = 5_000 if names < 100 else 500
    held = _traced_growth(cache, count, names)
    assert len(cache) == count
    assert cache.accounted_bytes >= held, (cache.accounted_bytes / count, held / count)
    key, namespace_id, page = _entry(0, names)
    assert cache.accounted_bytes >= count * entry_cost(key, namespace_id, page) * 0.9


def test_varied_page_sizes_stay_within_the_bound() -> None:
    """20,000 pages of one namespace, each another `pageSize`: the cache keeps what fits its bound (the
    response bytes alone, ~0.8 MB, would have let it keep all of them: ~12 MB)."""
    bound = 1024 * 1024
    cache = ListingCache(max_bytes=bound)
    held = _traced_growth(cache, 20_000, 0)
    assert cache.accounted_bytes <= bound
    assert held <= bound
    assert 0 < len(cache) < 20_000
