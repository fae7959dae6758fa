"""Many observations of a prometheus_client histogram written as one write per bucket and one to the sum.

The one module of floe that touches prometheus_client's private attributes: a `Histogram` child's
`_upper_bounds` (its bucket bounds, +Inf last), `_buckets` (one value per bound, each counting the
observations whose first bound >= them: not cumulative) and `_sum`, whose values have `inc(amount)`. In
multi-process mode these values are memory-mapped files, and each `inc` takes a lock and writes: a
loaded loop answers several requests per event-loop iteration, and `observe` per request costs a write
to the sum and a bucket each. prometheus_client has no public batched observation, and a custom collector
cannot serve multi-process mode (its `MultiProcessCollector` reads only those files).

pyproject.toml pins prometheus-client to the versions this was tested with; the contract is checked by
tests/unit/test_library_contracts.py (one process and multi-process). Should the attributes be missing
all the same, each value goes through the public `observe`.
"""

from __future__ import annotations

import bisect
from typing import Any

_INTERNALS = ("_upper_bounds", "_buckets", "_sum")


def observe_all(histogram: Any, values: list[float]) -> None:
    """`histogram.observe(value)` for each of `values` (a labelled child or an unlabelled histogram)."""
    bounds, buckets, total = (getattr(histogram, name, None) for name in _INTERNALS)
    if len(values) == 1 or bounds is None or buckets is None or total is None:
        for value in values:  # prometheus_client's own way
            histogram.observe(value)
        return
    counts = [0] * len(bounds)
    for value in values:
        counts[bisect.bisect_left(bounds, value)] += 1  # the first bucket whose bound is >= value
    total.inc(sum(values))
    for index, count in enumerate(counts):
        if count:
            buckets[index].inc(count)


def uses_internals(histogram: Any) -> bool:
    """Whether `observe_all` finds the private attributes it writes on `histogram` (else it falls back)."""
    return all(getattr(histogram, name, None) is not None for name in _INTERNALS)
