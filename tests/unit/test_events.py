"""The event bus: listeners run in subscription order, async ones are awaited, and a failing listener
never fails the publisher (its change is already committed)."""

from __future__ import annotations

import asyncio

from catalog.events import EventBus, PipelineApplied, TableChanged
from catalog.identifiers import Namespace
from catalog.store.records import WarehouseRecord

WAREHOUSE = WarehouseRecord("w1", "lake", "s3://bucket/lake", {})


def test_listeners_run_in_order_and_failures_stay_contained() -> None:
    bus = EventBus()
    seen: list[str] = []

    def failing(event: TableChanged) -> None:
        raise RuntimeError("listener bug")

    async def later(event: TableChanged) -> None:
        await asyncio.sleep(0)
        seen.append(f"async {event.name}")

    bus.subscribe(TableChanged, lambda event: seen.append(f"sync {event.namespace}.{event.name}"))
    bus.subscribe(TableChanged, failing)
    bus.subscribe(TableChanged, later)
    bus.subscribe(PipelineApplied, lambda event: seen.append(f"pipeline {event.revision}"))

    asyncio.run(bus.publish(TableChanged(WAREHOUSE, Namespace.of(["orders"]), "events")))
    assert seen == ["sync orders.events", "async events"]
    asyncio.run(bus.publish(PipelineApplied(3, "lake", frozenset({"glue"}))))
    assert seen[-1] == "pipeline 3"


def test_events_without_listeners_are_dropped() -> None:
    asyncio.run(EventBus().publish(PipelineApplied(1, "lake", frozenset())))
