"""catalog/collector.py: a full collection's survivors are frozen, so the next one skips them; a due
reclaim unfreezes everything, so a reference cycle that died while frozen is collected after all."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from catalog.collector import _FreezeSurvivors


class _Node:
    me: _Node | None = None


@pytest.fixture
def policy() -> Iterator[_FreezeSurvivors]:
    """A policy of its own, alone among this process's gc callbacks (an app made by another test
    installs one), and nothing frozen before or after."""
    others = [c for c in gc.callbacks if isinstance(c, _FreezeSurvivors)]
    for other in others:
        gc.callbacks.remove(other)
    gc.unfreeze()
    own = _FreezeSurvivors(reclaim_seconds=3600)
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


def test_younger_collections_change_nothing(policy: _FreezeSurvivors) -> None:
    gc.collect(0)
    gc.collect(1)
    assert gc.get_freeze_count() == 0
    assert policy.full_collections == 0
