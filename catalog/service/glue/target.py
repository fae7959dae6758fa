"""Where tables are published in AWS Glue: `FLOE_GLUE_*` when set, else the applied floe.yaml's `glue:`
section (a provider answering None turns publishing off)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from catalog.settings import Settings
from catalog.store.interfaces import PipelineStore


@dataclass(frozen=True, slots=True)
class GlueTarget:
    """The Glue Data Catalog to publish to: region (None: the AWS chain's), account id (None: the
    caller's account) and endpoint (None: AWS's regional endpoint)."""

    region: str | None = None
    catalog_id: str | None = None
    endpoint: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> GlueTarget | None:
        """The target `FLOE_GLUE_*` configure; None (publishing off) when none of them is set."""
        if not (settings.glue_region or settings.glue_catalog_id or settings.glue_endpoint):
            return None
        return cls(settings.glue_region, settings.glue_catalog_id, settings.glue_endpoint)


GlueTargetProvider = Callable[[], Awaitable[GlueTarget | None]]


class ConfiguredGlueTarget:
    """FLOE_GLUE_* when set, else the `glue:` section of the applied floe.yaml, read again at most every
    `cache_seconds` (so a `floe apply` that adds it turns publishing on in every catalog process)."""

    def __init__(self, settings: Settings, store: PipelineStore, cache_seconds: float = 10.0) -> None:
        self.fixed = GlueTarget.from_settings(settings)
        self.store = store
        self.cache_seconds = cache_seconds
        self._cached: tuple[float, GlueTarget | None] | None = None

    def invalidate(self) -> None:
        self._cached = None

    async def __call__(self) -> GlueTarget | None:
        if self.fixed is not None:
            return self.fixed
        now = time.monotonic()
        if self._cached is not None and now - self._cached[0] < self.cache_seconds:
            return self._cached[1]
        revision = await self.store.latest_pipeline_revision()
        glue = revision.config.get("glue") if revision is not None else None
        target = (
            GlueTarget(glue.get("region"), glue.get("catalog_id"), glue.get("endpoint"))
            if isinstance(glue, dict)
            else None
        )
        self._cached = (now, target)
        return target


def describe_target(target: GlueTarget) -> str:
    """The target for logs (no credentials are part of it)."""
    return f"region={target.region or '(AWS chain)'} catalog={target.catalog_id or '(own account)'} " + (
        f"endpoint={target.endpoint}" if target.endpoint else "endpoint=(AWS)"
    )
