"""The completeness watermark's derivation (catalog/watermarks.py): partitions, idle partitions,
caught-up times, nothing committed, steady traffic and out-of-order reports."""

from __future__ import annotations

from catalog.watermarks import Observation, PartitionState, completeness, observe, observe_all


def test_nothing_reported_is_no_watermark() -> None:
    found = completeness("t", {0: 10}, {})
    assert found.watermark_ms is None
    assert found.offset_completeness is None
    assert not found.complete_through(0)


def test_nothing_committed_and_records_waiting_is_not_complete() -> None:
    states = observe_all({}, {}, [(0, 5)], at_ms=1_000)
    found = completeness("t", {}, states)
    assert found.watermark_ms is None
    assert found.offset_completeness == 0.0
    assert found.partitions[0].committed_offset is None


def test_empty_partition_nothing_committed_is_complete_at_each_observation() -> None:
    states = observe_all({}, {}, [(0, 0)], at_ms=1_000)
    assert completeness("t", {}, states).watermark_ms == 1_000
    states = observe_all(states, {}, [(0, 0)], at_ms=6_000)
    found = completeness("t", {}, states)
    assert found.watermark_ms == 6_000
    assert found.offset_completeness == 1.0


def test_watermark_is_the_earliest_partition() -> None:
    committed = {0: 10, 1: 7}
    states = observe_all({}, committed, [(0, 10), (1, 7)], at_ms=1_000)
    states = observe_all(states, committed, [(0, 10), (1, 9)], at_ms=2_000)  # two records arrive in 1
    found = completeness("t", committed, states)
    assert [p.complete_through_ms for p in found.partitions] == [2_000, 1_000]
    assert found.watermark_ms == 1_000
    assert found.committed_records == 17
    assert found.end_records == 19
    assert found.offset_completeness == 17 / 19
    # The commit of partition 1's records makes it complete through the observation that saw them.
    found = completeness("t", {0: 10, 1: 9}, states)
    assert found.watermark_ms == 2_000
    assert found.complete_through(2_000)
    assert not found.complete_through(2_001)


def test_idle_partition_does_not_hold_the_watermark_back() -> None:
    committed = {0: 3, 1: 0}
    states: dict[int, PartitionState] = {}
    for at in (1_000, 2_000, 3_000):
        states = observe_all(states, committed, [(0, 3), (1, 0)], at_ms=at)
    assert completeness("t", committed, states).watermark_ms == 3_000


def test_partition_never_observed_but_committed_has_no_watermark() -> None:
    states = observe_all({}, {0: 4}, [(0, 4)], at_ms=1_000)
    assert completeness("t", {0: 4, 1: 2}, states).watermark_ms is None


def test_steady_traffic_advances_through_the_pending_observation() -> None:
    # Every report sees the end a little ahead of the commits; the oldest unreached observation is
    # kept and credited once the commits pass it.
    state = observe(None, 0, Observation(10, 1_000))
    assert state.caught_up_at_ms is None
    state = observe(state, 5, Observation(20, 2_000))  # 10 not reached: it becomes pending
    assert state.pending == Observation(10, 1_000)
    assert complete_through_at(state, 12) == 1_000
    state = observe(state, 15, Observation(30, 3_000))  # pending reached; 20 not: pending now
    assert state.caught_up_at_ms == 1_000
    assert state.pending == Observation(20, 2_000)
    state = observe(state, 30, Observation(30, 4_000))  # everything reached
    assert state.caught_up_at_ms == 4_000
    assert state.pending is None


def test_restart_keeps_the_last_caught_up_time() -> None:
    state = observe(None, 10, Observation(10, 1_000))
    state = observe(state, 10, Observation(50, 2_000))  # ingestion down: records pile up
    state = observe(state, 10, Observation(90, 3_000))
    assert complete_through_at(state, 10) == 1_000
    assert complete_through_at(state, 50) == 2_000  # the backlog committed up to the 2 s end
    assert complete_through_at(state, 90) == 3_000


def test_older_report_is_ignored() -> None:
    state = observe(None, 10, Observation(10, 5_000))
    assert observe(state, 10, Observation(10, 4_000)) == state


def complete_through_at(state: PartitionState, committed: int) -> int | None:
    from catalog.watermarks import complete_through

    return complete_through(state, committed)
