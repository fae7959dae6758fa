"""floe.yaml's `maintenance:` blocks: how `floe maintain` keeps a table fast and tidy (pure, no I/O).

A top-level block sets the defaults of every table floe maintains (tables outside floe.yaml included);
a table's own block overrides them key by key; keys set nowhere take `DEFAULT_POLICY`'s values:

    maintenance:                  # every table
      target_file_size_mb: 128    # compaction's target data file size
      snapshot_retention: 1h      # expire snapshots older than this …
      min_snapshots_to_keep: 5    # … but always keep the newest N
      orphan_file_age: 3d         # unreferenced files younger than this are never removed
      interval: 10m               # how often the table is maintained
      cold_after: 15m             # a partition not written for this long is cold (compacted first)
      hot_partition_max_files: 100  # compact a hot partition only when it has this many small files
    tables:
      - source_topic: clicks
        maintenance: {snapshot_retention: 7d}

Durations are a number and a unit, combinable: `90s`, `10m`, `1h30m`, `7d`, `2w`. Parsing reports every
problem as `(YAML path, message)`; `catalog.pipelines.config` turns them into `ConfigError`s.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, fields, replace
from typing import Any

from catalog.pipelines.yaml_values import describe_value

MAINTENANCE_KEYS = (
    "target_file_size_mb",
    "snapshot_retention",
    "min_snapshots_to_keep",
    "orphan_file_age",
    "interval",
    "cold_after",
    "hot_partition_max_files",
)
DURATION_KEYS = frozenset({"snapshot_retention", "orphan_file_age", "interval", "cold_after"})

_UNITS = {"w": 7 * 86_400, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DURATION = re.compile(r"^(?:\d+[wdhms])+$")
_DURATION_PART = re.compile(r"(\d+)([wdhms])")

# (minimum, maximum, why the minimum) per key; durations in seconds.
_LIMITS: dict[str, tuple[int, int, str]] = {
    "target_file_size_mb": (1, 16_384, ""),
    "snapshot_retention": (0, 3_650 * 86_400, ""),
    "min_snapshots_to_keep": (1, 1_000_000, "a table always keeps its current snapshot"),
    # Files of a commit still in flight are unreferenced until it lands: a short horizon would delete
    # them under a slow writer.
    "orphan_file_age": (3_600, 3_650 * 86_400, "younger files may belong to commits still in flight"),
    "interval": (10, 30 * 86_400, ""),
    "cold_after": (0, 30 * 86_400, ""),
    "hot_partition_max_files": (2, 1_000_000, "compaction needs at least two files"),
}


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


@dataclass(frozen=True)
class MaintenancePolicy:
    """What `floe maintain` does to one table, every value set (durations in seconds)."""

    target_file_size_mb: int = 128
    snapshot_retention: int = 3_600
    min_snapshots_to_keep: int = 5
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


@dataclass(frozen=True)
class MaintenanceConfig:
    """One `maintenance:` block as written: None for every key it leaves to the level above."""

    target_file_size_mb: int | None = None
    snapshot_retention: int | None = None
    min_snapshots_to_keep: int | None = None
    orphan_file_age: int | None = None
    interval: int | None = None
    cold_after: int | None = None
    hot_partition_max_files: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The keys this block sets (durations in canonical form); `parse_maintenance` reads it back."""
        body: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                body[f.name] = format_duration(value) if f.name in DURATION_KEYS else value
        return body

    def apply_to(self, policy: MaintenancePolicy) -> MaintenancePolicy:
        """`policy` with this block's keys overriding it."""
        changes = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return replace(policy, **changes)


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


def _limit_message(key: str, value: int) -> str | None:
    minimum, maximum, why = _LIMITS[key]
    if minimum <= value <= maximum:
        return None
    show = format_duration if key in DURATION_KEYS else str
    reason = f" ({why})" if why and value < minimum else ""
    return f"must be between {show(minimum)} and {show(maximum)}{reason}; got {show(value)}"


def parse_maintenance(raw: Any, path: str) -> tuple[MaintenanceConfig | None, list[tuple[str, str]]]:
    """A `maintenance:` block (at YAML path `path`) and its problems as `(path, message)` pairs.

    An empty block (`maintenance:` or `{}`) sets nothing; any problem makes the block None."""
    problems: list[tuple[str, str]] = []
    if raw is None:
        return MaintenanceConfig(), problems
    if not isinstance(raw, dict):
        problems.append(
            (path, f"expected a mapping with keys {', '.join(MAINTENANCE_KEYS)}; got {describe_value(raw)}")
        )
        return None, problems
    values: dict[str, int] = {}
    for key, value in raw.items():
        where = f"{path}.{key}"
        if key not in MAINTENANCE_KEYS:
            hint = difflib.get_close_matches(str(key), MAINTENANCE_KEYS, n=1)
            suggestion = (
                f"; did you mean {hint[0]!r}?" if hint else f" (expected: {', '.join(MAINTENANCE_KEYS)})"
            )
            problems.append((where, f"unknown key {str(key)!r}{suggestion}"))
            continue
        parsed = _duration(value) if key in DURATION_KEYS else _integer(value)
        if isinstance(parsed, str):
            problems.append((where, parsed))
            continue
        message = _limit_message(key, parsed)
        if message is not None:
            problems.append((where, message))
            continue
        values[key] = parsed
    if problems:
        return None, problems
    return MaintenanceConfig(**values), problems


def _duration(value: Any) -> int | str:
    """Seconds, or what is wrong."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return f"expected a duration like 30m, 1h or 7d; got {describe_value(value)}"
    if isinstance(value, int):
        hint = f"add a unit: {value}s, {value}m …"
        return f"expected a duration like 30m, 1h or 7d; got {describe_value(value)} ({hint})"
    seconds = parse_duration(value)
    if seconds is None:
        return f"invalid duration {value!r}: a number and a unit (s, m, h, d, w), like 30m, 1h30m or 7d"
    return seconds


def _integer(value: Any) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer; got {describe_value(value)}"
    return value


__all__ = [
    "DEFAULT_POLICY",
    "MAINTENANCE_KEYS",
    "MaintenanceConfig",
    "MaintenancePolicy",
    "format_duration",
    "parse_duration",
    "parse_maintenance",
    "resolve_policy",
]
