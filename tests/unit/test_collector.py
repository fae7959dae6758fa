"""catalog/collector.py: a full collection's survivors are frozen, so the next one skips them; a due
reclaim (by the clock; optionally also by the frozen generation's growth) unfreezes everything, so a
reference cycle that died while frozen is collected after all; every full collection's pause is observed."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from catalog.collector import _FreezeSurvivors, full_collection_pauses


class _Node:
    me: _Node | None = None


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def policy(registry: CollectorRegistry) -> Iterator[_FreezeSurvivors]:
    """A policy of its own, alone among this process's gc callbacks (an app made by another test
    installs one), and nothing frozen before or after."""
    others = [c for c in gc.callbacks if isinstance(c, _FreezeSurvivors)]
    for other in others:
        gc.callbacks.remove(other)
    gc.unfreeze()
    own = _FreezeSurvivors(reclaim_seconds=3600, pauses=full_collection_pauses(registry))
    gc.callbacks.append(own)
    try:
        yield own
    finally:
        gc.callbacks.remove(own)
        gc.unfreeze()
        gc.callbacks.extend(others)


def test_survivors_are_frozen_and_a_due_reclaim_collects_what_died_frozen(policy: _FreezeSurvivors) -> None:
    cycle = _Node()
    cycle.me = cycle
    alive = weakref.ref(cycle)
    gc.collect()  # a full collection: the cycle survives it and is frozen
    assert gc.get_freeze_count() > 0
    assert policy.full_collections == 1
    del cycle
    gc.collect()
    assert alive() is not None  # frozen: the full collection did not scan it
    policy.next_reclaim = 0.0  # a reclaim is due
    gc.collect()
    assert gc.get_freeze_count() == 0  # unfrozen at the end of that collection, for the next one
    gc.collect()  # the whole collection
    assert alive() is None
    assert gc.get_freeze_count() > 0  # and its survivors frozen again
    assert policy.next_reclaim > 0.0
    assert policy.reclaims == 1
    assert policy.live_after_reclaim > 1  # what the whole collection left (objects since freed aside)


def test_with_a_growth_no_reclaim_while_the_frozen_generation_holds_steady(policy: _FreezeSurvivors) -> None:
    policy.reclaim_growth = 2.0
    gc.collect()
    policy.live_after_reclaim = gc.get_freeze_count()  # as if a whole collection had just left this
    policy.next_reclaim = 0.0  # due by the clock
    for _ in range(3):
        gc.collect()
        assert gc.get_freeze_count() > 0  # never unfrozen: nothing grew
    assert policy.reclaims == 0
    policy.live_after_reclaim = gc.get_freeze_count() // 2  # now it has doubled
    gc.collect()
    assert gc.get_freeze_count() == 0


def test_with_a_growth_no_reclaim_before_its_time_however_much_grew(policy: _FreezeSurvivors) -> None:
    policy.reclaim_growth = 2.0
    policy.live_after_reclaim = 1
    gc.collect()
    gc.collect()
    assert gc.get_freeze_count() > 0
    assert policy.reclaims == 0


def test_every_full_collection_pause_is_observed_by_its_scan(
    policy: _FreezeSurvivors, registry: CollectorRegistry
) -> None:
    gc.collect()
    policy.next_reclaim = 0.0
    gc.collect()  # frozen skipped; a reclaim is now due
    gc.collect()  # the whole one
    gc.collect(1)  # not a full collection: not observed

    def count(scan: str) -> float | None:
        return registry.get_sample_value("floe_gc_full_collection_seconds_count", {"scan": scan})

    assert count("frozen skipped") == 2
    assert count("whole") == 1
    assert full_collection_pauses(registry) is full_collection_pauses(registry)  # registered once


def test_younger_collections_change_nothing(policy: _FreezeSurvivors) -> None:
    gc.collect(0)
    gc.collect(1)
    assert gc.get_freeze_count() == 0
    assert policy.full_collections == 0
