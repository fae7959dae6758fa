"""What happened in the catalog, told to whoever listens: side effects after a commit (Glue publishing
today, webhooks later) subscribe at startup instead of being called from the services.

Services `await events.publish(...)` once their change is committed. A listener runs in the publishing
request, so it must be cheap (queue the work, as the Glue publisher does) or be an operation the caller
should wait for; a listener that fails is logged and never fails the request: the change is committed.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from catalog.identifiers import Namespace
from catalog.store.records import WarehouseRecord

log = logging.getLogger(__name__)

E = TypeVar("E")
Listener = Callable[[E], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class TableChanged:
    """The table `namespace.name` of `warehouse` was created, committed to, dropped or renamed (a rename
    changes two names: each is told)."""

    warehouse: WarehouseRecord
    namespace: Namespace
    name: str


@dataclass(frozen=True, slots=True)
class PipelineApplied:
    """A floe.yaml revision was stored; `changed_sections` names its top-level sections that differ
    from the previous revision's."""

    revision: int
    warehouse: str
    changed_sections: frozenset[str]


class EventBus:
    """Listeners by event type, in the order they subscribed; one per catalog process."""

    def __init__(self) -> None:
        self._listeners: dict[type[Any], list[Callable[[Any], Awaitable[None] | None]]] = {}

    def subscribe(self, event_type: type[E], listener: Listener[E]) -> None:
        self._listeners.setdefault(event_type, []).append(listener)

    async def publish(self, event: object) -> None:
        for listener in self._listeners.get(type(event), ()):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("listener %r failed on %s", listener, type(event).__name__)
