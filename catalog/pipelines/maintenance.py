"""floe.yaml's `maintenance:` blocks: how `floe maintain` keeps a table fast and tidy (pure, no I/O).

A top-level block sets the defaults of every table floe maintains (tables outside floe.yaml included);
a table's own block overrides them key by key; keys set nowhere take `DEFAULT_POLICY`'s values:

    maintenance:                  # every table
      target_file_size_mb: 128    # compaction's target data file size
      snapshot_retention: 1h      # expire snapshots older than this …
      min_snapshots_to_keep: 5    # … but always keep the newest N
      max_snapshots: 100          # keep at most this many (0: no limit; upsert tables: 50)
      orphan_file_age: 3d         # unreferenced files younger than this are never removed
      interval: 10m               # how often the table is maintained
      cold_after: 15m             # a partition not written for this long is cold (compacted first)
      hot_partition_max_files: 100  # compact a hot partition only when it has this many small files
    tables:
      - source_topic: clicks
        maintenance: {snapshot_retention: 7d}

A table floe.yaml declares with `table_mode: upsert` starts from `UPSERT_DEFAULTS` instead (maintained
every minute, hot partitions compacted at 20 small files, at most 50 snapshots): it commits a merge every
batch, and every merge and every reader pays for its files and its history.

Durations are a number and a unit, combinable: `90s`, `10m`, `1h30m`, `7d`, `2w`. A block is a pydantic
model of the floe.yaml it is part of: its problems are that document's `ConfigError`s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, field_serializer

from catalog.pipelines.validation import ConfigModel, problem
from catalog.pipelines.yaml_values import describe_value

MAINTENANCE_KEYS = (
    "target_file_size_mb",
    "snapshot_retention",
    "min_snapshots_to_keep",
    "max_snapshots",
    "orphan_file_age",
    "interval",
    "cold_after",
    "hot_partition_max_files",
)
DURATION_KEYS = frozenset({"snapshot_retention", "orphan_file_age", "interval", "cold_after"})

_UNITS = {"w": 7 * 86_400, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DURATION = re.compile(r"^(?:\d+[wdhms])+$")
_DURATION_PART = re.compile(r"(\d+)([wdhms])")


def parse_duration(text: str) -> int | None:
    """Seconds in `text` (`90s`, `10m`, `1h30m`, `7d`, `2w`), or None when it is not a duration."""
    compact = text.strip().lower().replace(" ", "")
    if not _DURATION.match(compact):
        return None
    return sum(int(number) * _UNITS[unit] for number, unit in _DURATION_PART.findall(compact))


def format_duration(seconds: int) -> str:
    """The canonical text of a duration: the largest units that divide it (`5400` → `1h30m`)."""
    if seconds == 0:
        return "0s"
    parts: list[str] = []
    remaining = seconds
    for unit in ("d", "h", "m", "s"):
        count, remaining = divmod(remaining, _UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _seconds(value: Any) -> int:
    """A duration's seconds (a bare number is refused: it has no unit)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise problem(f"expected a duration like 30m, 1h or 7d; got {describe_value(value)}")
    if isinstance(value, int):
        hint = f"add a unit: {value}s, {value}m …"
        raise problem(f"expected a duration like 30m, 1h or 7d; got {describe_value(value)} ({hint})")
    seconds = parse_duration(value)
    if seconds is None:
        raise problem(
            f"invalid duration {value!r}: a number and a unit (s, m, h, d, w), like 30m, 1h30m or 7d"
        )
    return seconds


def _between(minimum: int, maximum: int, why: str = "", *, duration: bool = False) -> AfterValidator:
    """A limit whose message shows durations as durations and says why the minimum is what it is."""
    show: Callable[[int], str] = format_duration if duration else str

    def check(value: int) -> int:
        if not minimum <= value <= maximum:
            reason = f" ({why})" if why and value < minimum else ""
            raise problem(f"must be between {show(minimum)} and {show(maximum)}{reason}; got {show(value)}")
        return value

    return AfterValidator(check)


_YEARS_10 = 3_650 * 86_400
_DAYS_30 = 30 * 86_400
Seconds = Annotated[int, BeforeValidator(_seconds)]


@dataclass(frozen=True)
class MaintenancePolicy:
    """What `floe maintain` does to one table, every value set (durations in seconds)."""

    target_file_size_mb: int = 128
    snapshot_retention: int = 3_600
    min_snapshots_to_keep: int = 5
    # 0: no limit. A bound on the count, not the age: every retained snapshot is in metadata.json,
    # which each commit rewrites and each reader loads (DuckDB parses it on every query). At a commit
    # every 2 s an hour is 1,800 snapshots, about 1.2 MB of metadata: 19 ms of the catalog's CPU to write
    # per commit, 54 ms to parse, about 20x the cost at 100 snapshots
    # (benchmarks/results/many-tables-metadata-growth.md), which a thousand tables cannot afford.
    max_snapshots: int = 100
    orphan_file_age: int = 3 * 86_400
    interval: int = 600
    cold_after: int = 900
    hot_partition_max_files: int = 100

    @property
    def target_file_size_bytes(self) -> int:
        return self.target_file_size_mb * 1024 * 1024

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: format_duration(getattr(self, f.name))
            if f.name in DURATION_KEYS
            else getattr(self, f.name)
            for f in fields(self)
        }


DEFAULT_POLICY = MaintenancePolicy()
# An upsert table merges every batch into the files of the keys it touches: the merge's cost and the
# readers' grow with the files, and at a commit every few seconds an hour of history is over a thousand
# snapshots (benchmarks/results/upsert-1m-keys-maintained.md: 210 snapshots made DuckDB's point lookup
# 1.49x slower than the same files with one).
UPSERT_DEFAULTS: dict[str, int] = {"interval": 60, "hot_partition_max_files": 20, "max_snapshots": 50}


class MaintenanceConfig(ConfigModel):
    """One `maintenance:` block as written: None for every key it leaves to the level above."""

    target_file_size_mb: Annotated[int, _between(1, 16_384)] | None = None
    snapshot_retention: Annotated[Seconds, _between(0, _YEARS_10, duration=True)] | None = None
    min_snapshots_to_keep: (
        Annotated[int, _between(1, 1_000_000, "a table always keeps its current snapshot")] | None
    ) = None
    max_snapshots: Annotated[int, _between(0, 1_000_000)] | None = None
    # Files of a commit still in flight are unreferenced until it lands: a short horizon would delete
    # them under a slow writer.
    orphan_file_age: (
        Annotated[
            Seconds,
            _between(3_600, _YEARS_10, "younger files may belong to commits still in flight", duration=True),
        ]
        | None
    ) = None
    interval: Annotated[Seconds, _between(10, _DAYS_30, duration=True)] | None = None
    cold_after: Annotated[Seconds, _between(0, _DAYS_30, duration=True)] | None = None
    hot_partition_max_files: (
        Annotated[int, _between(2, 1_000_000, "compaction needs at least two files")] | None
    ) = None

    @field_serializer(*DURATION_KEYS, when_used="json")
    def _duration_text(self, seconds: int | None) -> str | None:
        return None if seconds is None else format_duration(seconds)

    def apply_to(self, policy: MaintenancePolicy) -> MaintenancePolicy:
        """`policy` with this block's keys overriding it."""
        return replace(policy, **self.model_dump(exclude_none=True))


def defaults_for_mode(defaults: MaintenancePolicy, table_mode: str) -> MaintenancePolicy:
    """The defaults of a table in `table_mode` (`append` or `upsert`): `defaults`, with
    `UPSERT_DEFAULTS` over them for an upsert table."""
    return replace(defaults, **UPSERT_DEFAULTS) if table_mode == "upsert" else defaults


def resolve_policy(
    top_level: MaintenanceConfig | None,
    table: MaintenanceConfig | None,
    defaults: MaintenancePolicy = DEFAULT_POLICY,
) -> MaintenancePolicy:
    """A table's policy: its own block over the top-level block over `defaults`."""
    policy = defaults
    for block in (top_level, table):
        if block is not None:
            policy = block.apply_to(policy)
    return policy


__all__ = [
    "DEFAULT_POLICY",
    "MAINTENANCE_KEYS",
    "UPSERT_DEFAULTS",
    "MaintenanceConfig",
    "MaintenancePolicy",
    "defaults_for_mode",
    "format_duration",
    "parse_duration",
    "resolve_policy",
]
