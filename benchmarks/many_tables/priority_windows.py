"""`--maintain-nice N --nice-window S`: the long-running `floe maintain` at two CPU priorities in one run.

The worker starts at normal priority (`--nice 0`); from `floe ingest`'s start the run sets every thread of
its process tree (Spark's JVM, when one starts, included) and its session's autogroup (what competes with
the other sessions' processes) to niceness 0 and N by turns, S seconds each,
so both priorities meet the same tables, backlog and machine, alternating. Per priority, over the
measured window: ingestion's freshness of the records produced in its windows (the last 15 s of each
left out: those records commit under the next window's priority), the CPU of ingestion, the catalog
(floe + PostgreSQL) and the worker, and the worker's visits and data files rewritten a second.
Going back from N to 0 needs root (or CAP_SYS_NICE), which the run checks at its start.
"""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

from benchmarks.many_tables.freshness import p99
from benchmarks.many_tables.maintenance import Visit
from floe.cli.services import autogroup_nice

# Records produced this close to a window's end commit under the next one's priority.
TAIL_S = 15.0


@dataclass
class PriorityRow:
    """One priority's share of the measured window."""

    nice: int
    windows: int
    seconds: float
    records: int
    missing: int
    freshness_p50_s: float | None
    freshness_p99_s: float | None
    freshness_max_s: float | None
    ingest_cores: float
    catalog_cores: float
    maintain_cores: float
    visits: int
    files_rewritten: int
    files_a_second: float


class PriorityWindows:
    """Alternates the niceness of a process tree, `seconds` at a time, from `since` (epoch s)."""

    def __init__(self, pid: int, nice: int, seconds: float, since: float) -> None:
        if os.geteuid() != 0:
            raise SystemExit("--nice-window sets a niceness back to 0, which needs root (or CAP_SYS_NICE)")
        self.pid, self.nice, self.seconds, self.since = pid, nice, seconds, since
        self.windows: list[tuple[float, float, int]] = []  # start, end (epoch s), niceness
        self.visits: list[tuple[float, Visit]] = []  # began (epoch s), what it did

    def record_visits(self, fetch: Callable[[str, float], list[Any]]) -> None:
        """The worker's visits since the first window (while the database is still up)."""
        query = (
            "SELECT extract(epoch from started_at) AS began, actions, error FROM maintenance_passes "
            "WHERE started_at >= to_timestamp($1)"
        )
        self.visits = [(float(row["began"]), Visit.of(row)) for row in fetch(query, self.since)]

    def apply(self, now: float) -> None:
        """Every thread of the tree at the niceness of `now`'s window (threads started since included)."""
        index = int((now - self.since) // self.seconds)
        level = self.nice if index % 2 else 0
        start = self.since + index * self.seconds
        if not self.windows or self.windows[-1][0] != start:
            self.windows.append((start, start + self.seconds, level))
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.pid)
            for process in [root, *root.children(recursive=True)]:
                with contextlib.suppress(OSError):
                    for task in Path(f"/proc/{process.pid}/task").iterdir():
                        with contextlib.suppress(OSError):
                            if os.getpriority(os.PRIO_PROCESS, int(task.name)) != level:
                                os.setpriority(os.PRIO_PROCESS, int(task.name), level)
        # The worker leads its own session: Linux's autogroup of that session is what competes with
        # ingestion's and the catalog's (floe.cli.services.lower_cpu_priority).
        current = autogroup_nice(self.pid)
        if current is not None and current != level:
            with contextlib.suppress(OSError):
                Path(f"/proc/{self.pid}/autogroup").write_text(str(level))

    def rows(
        self,
        produced: dict[tuple[str, int], float],
        seen: dict[tuple[str, int], float],
        cores: Callable[[float, float], dict[str, float]],
        measure_from: float,
        measure_to: float,
    ) -> list[PriorityRow]:
        """Each priority over the whole windows inside [measure_from, measure_to] (`record_visits`
        first)."""
        inside = [w for w in self.windows if w[0] >= measure_from and w[1] <= measure_to]
        visits = self.visits
        rows = []
        for level in sorted({w[2] for w in inside}):
            mine = [w for w in inside if w[2] == level]
            seconds = sum(end - start for start, end, _ in mine)
            ages: list[float] = []
            missing = 0
            for key, sent in produced.items():
                if any(start <= sent < end - TAIL_S for start, end, _ in mine):
                    shown = seen.get(key)
                    if shown is None:
                        missing += 1
                    else:
                        ages.append(shown - sent)
            ages.sort()
            used: dict[str, float] = {}
            for start, end, _ in mine:
                for group, value in cores(start, end).items():
                    used[group] = used.get(group, 0.0) + value * (end - start)
            in_windows = [v for began, v in visits if any(s <= began < e for s, e, _ in mine)]
            rewritten = sum(v.rewritten for v in in_windows)
            high = p99(ages) if ages else None
            row = PriorityRow(
                nice=level,
                windows=len(mine),
                seconds=round(seconds),
                records=len(ages),
                missing=missing,
                freshness_p50_s=round(statistics.median(ages), 2) if ages else None,
                freshness_p99_s=round(high, 2) if high is not None else None,
                freshness_max_s=round(ages[-1], 2) if ages else None,
                ingest_cores=round(used.get("ingester", 0.0) / seconds, 2),
                catalog_cores=round(used.get("catalog", 0.0) / seconds, 2),
                maintain_cores=round(used.get("maintainer", 0.0) / seconds, 2),
                visits=len(in_windows),
                files_rewritten=rewritten,
                files_a_second=round(rewritten / seconds, 1),
            )
            rows.append(row)
        return rows


def markdown(rows: list[dict[str, Any]], seconds: float) -> list[str]:
    lines = [
        f"`floe maintain` at niceness 0 and at `--maintain-nice` by turns, {seconds:.0f} s each "
        "(benchmarks/many_tables/priority_windows.py):",
        "",
        "| niceness | windows (s) | records (missing) | freshness p50 / p99 / max | ingestion CPU | "
        "catalog + PG CPU | `floe maintain` CPU | visits | files rewritten (a second) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['nice']} | {r['windows']} ({r['seconds']} s) | {r['records']:,} ({r['missing']:,}) | "
            f"{r['freshness_p50_s']} / {r['freshness_p99_s']} / {r['freshness_max_s']} s | "
            f"{r['ingest_cores']} | {r['catalog_cores']} | {r['maintain_cores']} | {r['visits']:,} | "
            f"{r['files_rewritten']:,} ({r['files_a_second']}) |"
        )
    return lines


__all__ = ["PriorityRow", "PriorityWindows", "markdown"]
