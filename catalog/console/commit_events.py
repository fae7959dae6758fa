"""The overview's *Commit events* section (docs/commit-events.md): whether this catalog publishes commit
events, and how many wait in the outbox since when. The outbox holds every cluster's events, so only
global administrators see it; for any other key there is nothing to show."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.auth import Principal
from catalog.settings import Settings
from catalog.store.interfaces import OutboxStore


@dataclass(frozen=True, slots=True)
class OutboxStatus:
    enabled: bool  # FLOE_EVENTS_KAFKA_BOOTSTRAP_SERVERS set: changes write events, the publisher sends
    topic: str  # FLOE_EVENTS_TOPIC (`{cluster}` in it is the table's cluster)
    depth: int  # events waiting in the outbox (of every cluster)
    oldest_ms: int | None  # when the oldest waiting event was written


async def outbox_status(principal: Principal, store: OutboxStore, settings: Settings) -> OutboxStatus | None:
    """The outbox as operators see it; None for a key that is not a global administrator. One count
    over the outbox, which is empty or small while the events cluster answers."""
    if not principal.is_admin:
        return None
    depth, oldest_ms = await store.outbox_depth()
    return OutboxStatus(
        bool(settings.events_kafka_bootstrap_servers), settings.events_topic, depth, oldest_ms
    )
